"""The CRD's bounds as reviewed: tests/unit/test_crd_bounds_meta.py fails when the schema's bounds differ
from this table, so a loosened (or tightened, added, removed) bound is a deliberate, reviewed change here and
not a silent one. The generated admission cases test that the API server enforces whatever the schema says;
this table says what the schema should say. Regenerate the literal with
`python -c "from tests import crd_bounds as cb; import pprint; pprint.pprint(cb.snapshot(), width=110, sort_dicts=False)"`
and review the diff."""

EXPECTED_BOUNDS = {'<root>:required=spec': True,
 'spec:required=image': True,
 'spec:required=store': True,
 'spec:cel[has(self.scorers) ? !has(self.scorer.name) && !has(self.scorer.class) : has(self.scorer.name) != has(self.scorer.class)]': 'set '
                                                                                                                                      'exactly '
                                                                                                                                      'one '
                                                                                                                                      'of '
                                                                                                                                      'scorer.name '
                                                                                                                                      '(a '
                                                                                                                                      'built-in '
                                                                                                                                      'scorer) '
                                                                                                                                      'or '
                                                                                                                                      'scorer.class '
                                                                                                                                      '(package.module:Class); '
                                                                                                                                      'with '
                                                                                                                                      'spec.scorers '
                                                                                                                                      'set '
                                                                                                                                      'neither '
                                                                                                                                      '(scorer '
                                                                                                                                      'then '
                                                                                                                                      'holds '
                                                                                                                                      'shared '
                                                                                                                                      'settings)',
 "spec:cel[self.store.protocol != 'rdma' || self.placement.rdmaResource.count > 0 || (has(self.store.devices) && size(self.store.devices) > 0)]": 'store.protocol '
                                                                                                                                                  'rdma '
                                                                                                                                                  'needs '
                                                                                                                                                  'an '
                                                                                                                                                  'RDMA '
                                                                                                                                                  'device: '
                                                                                                                                                  'set '
                                                                                                                                                  'placement.rdmaResource.count '
                                                                                                                                                  '>= '
                                                                                                                                                  '1 '
                                                                                                                                                  'or '
                                                                                                                                                  'list '
                                                                                                                                                  'store.devices '
                                                                                                                                                  '(use '
                                                                                                                                                  'protocol '
                                                                                                                                                  'tcp '
                                                                                                                                                  'on '
                                                                                                                                                  'nodes '
                                                                                                                                                  'without '
                                                                                                                                                  'RDMA)',
 "spec:cel[!(type(self.store.segmentSize) == string && self.store.segmentSize == 'auto') || has(self.sizing)]": 'store.segmentSize '
                                                                                                                'auto '
                                                                                                                'is '
                                                                                                                'computed '
                                                                                                                'from '
                                                                                                                'spec.sizing: '
                                                                                                                'set '
                                                                                                                'spec.sizing '
                                                                                                                '(samplesPerRollout, '
                                                                                                                'outputBytesPerSample) '
                                                                                                                'or '
                                                                                                                'give '
                                                                                                                'an '
                                                                                                                'explicit '
                                                                                                                'size',
 'spec:cel[!has(self.autoscaling) || !self.autoscaling.enabled || (self.replicas >= self.autoscaling.minReplicas && self.replicas <= self.autoscaling.maxReplicas)]': 'replicas '
                                                                                                                                                                      'must '
                                                                                                                                                                      'lie '
                                                                                                                                                                      'within '
                                                                                                                                                                      '[autoscaling.minReplicas, '
                                                                                                                                                                      'autoscaling.maxReplicas] '
                                                                                                                                                                      'while '
                                                                                                                                                                      'autoscaling '
                                                                                                                                                                      'is '
                                                                                                                                                                      'enabled',
 'spec:cel[!has(self.scorers) || !has(self.scorer.engine)]': 'with spec.scorers, name the engine on the '
                                                             'component it serves (scorer holds shared '
                                                             'settings)',
 'spec.replicas:minimum': 0,
 'spec.replicas:maximum': 1000,
 'spec.image:minLength': 1,
 "spec.scorer:cel[!has(self.model) || !has(self.modelPath) || self.modelPath == '']": 'set scorer.model (the '
                                                                                      'operator mounts it) '
                                                                                      'or scorer.modelPath '
                                                                                      '(a directory you '
                                                                                      'mount), not both',
 "spec.scorer:cel[!has(self.name) || self.name != 'openai-judge' || has(self.engine) || (has(self.args) && has(self.args.base_url) && has(self.args.model))]": 'scorer.name '
                                                                                                                                                               'openai-judge '
                                                                                                                                                               'needs '
                                                                                                                                                               'args.base_url '
                                                                                                                                                               '(the '
                                                                                                                                                               "endpoint's "
                                                                                                                                                               'URL, '
                                                                                                                                                               'e.g. '
                                                                                                                                                               'http://judge:8000/v1) '
                                                                                                                                                               'and '
                                                                                                                                                               'args.model, '
                                                                                                                                                               'or '
                                                                                                                                                               'an '
                                                                                                                                                               'engine '
                                                                                                                                                               'the '
                                                                                                                                                               'pool '
                                                                                                                                                               'runs '
                                                                                                                                                               'for '
                                                                                                                                                               'it '
                                                                                                                                                               '(scorer.engine)',
 "spec.scorer:cel[!has(self.engine) || !has(self.name) || self.name == 'openai-judge']": 'scorer.engine: an '
                                                                                         'engine serves a '
                                                                                         'judge '
                                                                                         '(openai-judge, or '
                                                                                         'a custom class '
                                                                                         'that takes '
                                                                                         'base_url, model '
                                                                                         'and hosted), not '
                                                                                         'this built-in',
 'spec.scorer:cel[!has(self.engine) || !has(self.args) || (!has(self.args.base_url) && !has(self.args.model))]': 'scorer.engine: '
                                                                                                                 'the '
                                                                                                                 'pool '
                                                                                                                 'points '
                                                                                                                 'the '
                                                                                                                 'judge '
                                                                                                                 'at '
                                                                                                                 'its '
                                                                                                                 'engine: '
                                                                                                                 'drop '
                                                                                                                 'base_url '
                                                                                                                 'and '
                                                                                                                 'model '
                                                                                                                 'from '
                                                                                                                 'args',
 "spec.scorer:cel[!has(self.engine) || (!has(self.model) && (!has(self.modelPath) || self.modelPath == ''))]": 'scorer.engine: '
                                                                                                               'the '
                                                                                                               "engine's "
                                                                                                               'weights '
                                                                                                               'go '
                                                                                                               'in '
                                                                                                               'engine.model, '
                                                                                                               'not '
                                                                                                               'in '
                                                                                                               'the '
                                                                                                               "scorer's "
                                                                                                               'model '
                                                                                                               'or '
                                                                                                               'modelPath',
 "spec.scorer:cel[!has(self.name) || self.name != 'pickscore' || (has(self.modelPath) && self.modelPath != '') || has(self.model)]": 'scorer.name '
                                                                                                                                     'pickscore '
                                                                                                                                     'needs '
                                                                                                                                     'scorer.model '
                                                                                                                                     '(a '
                                                                                                                                     'pvc '
                                                                                                                                     'or '
                                                                                                                                     'image '
                                                                                                                                     'the '
                                                                                                                                     'operator '
                                                                                                                                     'mounts) '
                                                                                                                                     'or '
                                                                                                                                     'scorer.modelPath: '
                                                                                                                                     'the '
                                                                                                                                     'directory '
                                                                                                                                     'of '
                                                                                                                                     'the '
                                                                                                                                     'CLIP '
                                                                                                                                     'model '
                                                                                                                                     'inside '
                                                                                                                                     'the '
                                                                                                                                     'worker '
                                                                                                                                     'pod '
                                                                                                                                     '(mount '
                                                                                                                                     'it '
                                                                                                                                     'through '
                                                                                                                                     'podTemplate '
                                                                                                                                     'volumes)',
 "spec.scorer:cel[!has(self.name) || self.name != 'hps' || (has(self.modelPath) && self.modelPath != '') || has(self.model)]": 'scorer.name '
                                                                                                                               'hps '
                                                                                                                               'needs '
                                                                                                                               'scorer.model '
                                                                                                                               '(a '
                                                                                                                               'pvc '
                                                                                                                               'or '
                                                                                                                               'image '
                                                                                                                               'the '
                                                                                                                               'operator '
                                                                                                                               'mounts) '
                                                                                                                               'or '
                                                                                                                               'scorer.modelPath: '
                                                                                                                               "HPS's "
                                                                                                                               'checkpoint '
                                                                                                                               'file, '
                                                                                                                               'or '
                                                                                                                               'the '
                                                                                                                               'directory '
                                                                                                                               'holding '
                                                                                                                               'it '
                                                                                                                               '(HPS_v2.1_compressed.pt), '
                                                                                                                               'inside '
                                                                                                                               'the '
                                                                                                                               'worker '
                                                                                                                               'pod',
 "spec.scorer:cel[!has(self.name) || self.name != 'ocr' || (has(self.modelPath) && self.modelPath != '') || has(self.model)]": 'scorer.name '
                                                                                                                               'ocr '
                                                                                                                               'needs '
                                                                                                                               'scorer.model '
                                                                                                                               '(a '
                                                                                                                               'pvc '
                                                                                                                               'or '
                                                                                                                               'image '
                                                                                                                               'the '
                                                                                                                               'operator '
                                                                                                                               'mounts) '
                                                                                                                               'or '
                                                                                                                               'scorer.modelPath: '
                                                                                                                               'a '
                                                                                                                               'directory '
                                                                                                                               'with '
                                                                                                                               "PaddleOCR's "
                                                                                                                               'det/, '
                                                                                                                               'rec/ '
                                                                                                                               'and '
                                                                                                                               'cls/ '
                                                                                                                               'inference '
                                                                                                                               'models '
                                                                                                                               'inside '
                                                                                                                               'the '
                                                                                                                               'worker '
                                                                                                                               'pod',
 "spec.scorer:cel[!has(self.name) || self.name != 'hps' || !has(self.args) || !has(self.args.version) || self.args.version in ['v2.1', 'v2.0']]": 'scorer.name '
                                                                                                                                                  'hps: '
                                                                                                                                                  'args.version '
                                                                                                                                                  'is '
                                                                                                                                                  'v2.1 '
                                                                                                                                                  '(the '
                                                                                                                                                  'default) '
                                                                                                                                                  'or '
                                                                                                                                                  'v2.0',
 "spec.scorer:cel[!has(self.dtype) || self.dtype == 'float32' || !has(self.device) || self.device != 'cpu']": 'scorer.dtype '
                                                                                                              'float16 '
                                                                                                              'and '
                                                                                                              'bfloat16 '
                                                                                                              'are '
                                                                                                              'for '
                                                                                                              'GPUs: '
                                                                                                              'use '
                                                                                                              'float32 '
                                                                                                              'with '
                                                                                                              'device '
                                                                                                              'cpu',
 "spec.scorer:cel[!has(self.device) || self.device != 'cuda' || (has(self.gpus) && self.gpus > 0)]": 'scorer.device '
                                                                                                     'cuda '
                                                                                                     'needs '
                                                                                                     'scorer.gpus '
                                                                                                     '>= 1: '
                                                                                                     'a '
                                                                                                     'container '
                                                                                                     'that '
                                                                                                     'requests '
                                                                                                     'no GPU '
                                                                                                     'sees '
                                                                                                     'none',
 'spec.scorer.name:pattern': '^[a-z][a-z0-9-]*$',
 'spec.scorer.class:pattern': '^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*$',
 'spec.scorer.args:cel[!has(self.api_key) && !has(self.apiKey) && !has(self.token) && !has(self.password)]': 'a '
                                                                                                             'key '
                                                                                                             'never '
                                                                                                             'goes '
                                                                                                             'in '
                                                                                                             'args '
                                                                                                             '(anyone '
                                                                                                             'who '
                                                                                                             'can '
                                                                                                             'read '
                                                                                                             'the '
                                                                                                             'pool '
                                                                                                             'sees '
                                                                                                             'it): '
                                                                                                             'put '
                                                                                                             'it '
                                                                                                             'in '
                                                                                                             'a '
                                                                                                             'Secret '
                                                                                                             'and '
                                                                                                             'name '
                                                                                                             'it '
                                                                                                             'in '
                                                                                                             'apiKeySecret',
 'spec.scorer.args.base_url:pattern': '^https?://[^\\s]+$',
 'spec.scorer.args.model:minLength': 1,
 'spec.scorer.apiKeySecret:required=name': True,
 'spec.scorer.apiKeySecret.name:minLength': 1,
 'spec.scorer.apiKeySecret.name:maxLength': 253,
 'spec.scorer.apiKeySecret.key:minLength': 1,
 'spec.scorer.apiKeySecret.key:maxLength': 253,
 'spec.scorer.engine:required=kind': True,
 'spec.scorer.engine:required=model': True,
 "spec.scorer.engine:cel[self.kind != 'llamacpp' || has(self.modelFile)]": 'scorer.engine.modelFile: '
                                                                           'llamacpp serves one GGUF file: '
                                                                           'name it under the model source',
 'spec.scorer.engine:cel[!has(self.tensorParallel) || !has(self.gpus) || self.gpus == 0 || self.tensorParallel <= self.gpus]': 'scorer.engine.tensorParallel '
                                                                                                                               'is '
                                                                                                                               'more '
                                                                                                                               'than '
                                                                                                                               'its '
                                                                                                                               'GPUs',
 'spec.scorer.engine.kind:enum': ['vllm', 'sglang', 'llamacpp'],
 'spec.scorer.engine.image:minLength': 1,
 'spec.scorer.engine.image:maxLength': 1024,
 'spec.scorer.engine.model:cel[[has(self.pvc), has(self.image), has(self.cache)].filter(x, x).size() == 1]': 'scorer.engine.model '
                                                                                                             'names '
                                                                                                             'exactly '
                                                                                                             'one '
                                                                                                             'source: '
                                                                                                             'pvc, '
                                                                                                             'image '
                                                                                                             'or '
                                                                                                             'cache',
 'spec.scorer.engine.model.pvc:required=claimName': True,
 'spec.scorer.engine.model.pvc.claimName:minLength': 1,
 'spec.scorer.engine.model.pvc.claimName:maxLength': 253,
 'spec.scorer.engine.model.pvc.subPath:maxLength': 1024,
 'spec.scorer.engine.model.image:required=reference': True,
 'spec.scorer.engine.model.image.reference:minLength': 1,
 'spec.scorer.engine.model.image.reference:maxLength': 1024,
 'spec.scorer.engine.model.image.pullPolicy:enum': ['Always', 'IfNotPresent', 'Never'],
 'spec.scorer.engine.model.cache:required=name': True,
 'spec.scorer.engine.model.cache.name:minLength': 1,
 'spec.scorer.engine.model.cache.name:maxLength': 63,
 'spec.scorer.engine.model.cache.subPath:maxLength': 1024,
 'spec.scorer.engine.model.cache.placement:enum': ['Required', 'Preferred'],
 'spec.scorer.engine.modelFile:minLength': 1,
 'spec.scorer.engine.modelFile:maxLength': 1024,
 'spec.scorer.engine.modelFile:pattern': '^[^/].*$',
 'spec.scorer.engine.servedModelName:minLength': 1,
 'spec.scorer.engine.servedModelName:maxLength': 253,
 'spec.scorer.engine.args:maxItems': 64,
 'spec.scorer.engine.args[0]:maxLength': 4096,
 'spec.scorer.engine.gpus:minimum': 0,
 'spec.scorer.engine.gpus:maximum': 16,
 'spec.scorer.engine.tensorParallel:minimum': 1,
 'spec.scorer.engine.tensorParallel:maximum': 16,
 'spec.scorer.engine.maxModelLen:minimum': 128,
 'spec.scorer.engine.maxModelLen:maximum': 10485760,
 'spec.scorer.engine.gpuMemoryUtilization:minimum': 'exclusive 0',
 'spec.scorer.engine.gpuMemoryUtilization:maximum': 1,
 'spec.scorer.engine.startupSeconds:minimum': 10,
 'spec.scorer.engine.startupSeconds:maximum': 86400,
 'spec.scorer.numFrames:minimum': 1,
 'spec.scorer.numFrames:maximum': 4096,
 'spec.scorer.model:cel[[has(self.pvc), has(self.image), has(self.cache)].filter(x, x).size() == 1]': 'scorer.model '
                                                                                                      'names '
                                                                                                      'exactly '
                                                                                                      'one '
                                                                                                      'source: '
                                                                                                      'pvc, '
                                                                                                      'image '
                                                                                                      'or '
                                                                                                      'cache',
 'spec.scorer.model.pvc:required=claimName': True,
 'spec.scorer.model.pvc.claimName:minLength': 1,
 'spec.scorer.model.pvc.claimName:maxLength': 253,
 'spec.scorer.model.pvc.subPath:maxLength': 1024,
 'spec.scorer.model.image:required=reference': True,
 'spec.scorer.model.image.reference:minLength': 1,
 'spec.scorer.model.image.reference:maxLength': 1024,
 'spec.scorer.model.image.pullPolicy:enum': ['Always', 'IfNotPresent', 'Never'],
 'spec.scorer.model.cache:required=name': True,
 'spec.scorer.model.cache.name:minLength': 1,
 'spec.scorer.model.cache.name:maxLength': 63,
 'spec.scorer.model.cache.subPath:maxLength': 1024,
 'spec.scorer.model.cache.placement:enum': ['Required', 'Preferred'],
 'spec.scorer.modelMemory:pattern': '^[0-9]+(\\.[0-9]+)?([KMGTPE]i|[kMGTPE])?$',
 'spec.scorer.batchSize:minimum': 1,
 'spec.scorer.batchSize:maximum': 4096,
 'spec.scorer.framesPerForward:minimum': 1,
 'spec.scorer.framesPerForward:maximum': 4096,
 'spec.scorer.device:enum': ['auto', 'cpu', 'cuda'],
 'spec.scorer.gpus:minimum': 0,
 'spec.scorer.gpus:maximum': 16,
 'spec.scorer.dtype:enum': ['float32', 'float16', 'bfloat16'],
 'spec.scorers:minItems': 1,
 'spec.scorers:maxItems': 16,
 "spec.scorers:cel[self.all(a, !has(a.key) && !has(a.name) || self.exists_one(b, (has(b.key) ? b.key : has(b.name) ? b.name : '') == (has(a.key) ? a.key : a.name)))]": "'spec.scorers "
                                                                                                                                                                        'names '
                                                                                                                                                                        'the '
                                                                                                                                                                        'reward '
                                                                                                                                                                        'key '
                                                                                                                                                                        "' "
                                                                                                                                                                        '+ '
                                                                                                                                                                        'self.filter(a, '
                                                                                                                                                                        'has(a.key) '
                                                                                                                                                                        '|| '
                                                                                                                                                                        'has(a.name)).map(a, '
                                                                                                                                                                        'has(a.key) '
                                                                                                                                                                        '? '
                                                                                                                                                                        'a.key '
                                                                                                                                                                        ': '
                                                                                                                                                                        'a.name).filter(k, '
                                                                                                                                                                        'self.filter(b, '
                                                                                                                                                                        '(has(b.key) '
                                                                                                                                                                        '? '
                                                                                                                                                                        'b.key '
                                                                                                                                                                        ': '
                                                                                                                                                                        'has(b.name) '
                                                                                                                                                                        '? '
                                                                                                                                                                        'b.name '
                                                                                                                                                                        ': '
                                                                                                                                                                        "'') "
                                                                                                                                                                        '== '
                                                                                                                                                                        'k).size() '
                                                                                                                                                                        '> '
                                                                                                                                                                        '1)[0] '
                                                                                                                                                                        '+ '
                                                                                                                                                                        "' "
                                                                                                                                                                        'twice: '
                                                                                                                                                                        'each '
                                                                                                                                                                        'component '
                                                                                                                                                                        'needs '
                                                                                                                                                                        'its '
                                                                                                                                                                        'own '
                                                                                                                                                                        'key '
                                                                                                                                                                        '(set '
                                                                                                                                                                        'key '
                                                                                                                                                                        'on '
                                                                                                                                                                        'one '
                                                                                                                                                                        'of '
                                                                                                                                                                        "them)'",
 "spec.scorers[0]:cel[!has(self.model) || !has(self.modelPath) || self.modelPath == '']": 'set model (the '
                                                                                          'operator mounts '
                                                                                          'it) or modelPath '
                                                                                          '(a directory you '
                                                                                          'mount) in a '
                                                                                          'scorers entry, '
                                                                                          'not both',
 'spec.scorers[0]:cel[has(self.name) != has(self.class)]': 'set exactly one of name (a built-in scorer) or '
                                                           'class (package.module:Class) in each scorers '
                                                           'entry',
 'spec.scorers[0]:cel[has(self.name) || has(self.key)]': 'a custom class in scorers needs key: the name its '
                                                         "score is reported under (the framework's reward "
                                                         'name, e.g. ocr)',
 "spec.scorers[0]:cel[!has(self.key) || self.key != 'weighted']": "key weighted is the mixture's weighted "
                                                                  'sum: name the component otherwise',
 "spec.scorers[0]:cel[!has(self.name) || self.name != 'openai-judge' || has(self.engine) || (has(self.args) && has(self.args.base_url) && has(self.args.model))]": 'a '
                                                                                                                                                                   'scorers '
                                                                                                                                                                   'entry '
                                                                                                                                                                   'named '
                                                                                                                                                                   'openai-judge '
                                                                                                                                                                   'needs '
                                                                                                                                                                   'args.base_url '
                                                                                                                                                                   '(the '
                                                                                                                                                                   "endpoint's "
                                                                                                                                                                   'URL, '
                                                                                                                                                                   'e.g. '
                                                                                                                                                                   'http://judge:8000/v1) '
                                                                                                                                                                   'and '
                                                                                                                                                                   'args.model, '
                                                                                                                                                                   'or '
                                                                                                                                                                   'an '
                                                                                                                                                                   'engine '
                                                                                                                                                                   'the '
                                                                                                                                                                   'pool '
                                                                                                                                                                   'runs '
                                                                                                                                                                   'for '
                                                                                                                                                                   'it '
                                                                                                                                                                   '(engine)',
 "spec.scorers[0]:cel[!has(self.engine) || !has(self.name) || self.name == 'openai-judge']": 'scorers[].engine: '
                                                                                             'an engine '
                                                                                             'serves a judge '
                                                                                             '(openai-judge, '
                                                                                             'or a custom '
                                                                                             'class that '
                                                                                             'takes '
                                                                                             'base_url, '
                                                                                             'model and '
                                                                                             'hosted), not '
                                                                                             'this built-in',
 'spec.scorers[0]:cel[!has(self.engine) || !has(self.args) || (!has(self.args.base_url) && !has(self.args.model))]': 'scorers[].engine: '
                                                                                                                     'the '
                                                                                                                     'pool '
                                                                                                                     'points '
                                                                                                                     'the '
                                                                                                                     'judge '
                                                                                                                     'at '
                                                                                                                     'its '
                                                                                                                     'engine: '
                                                                                                                     'drop '
                                                                                                                     'base_url '
                                                                                                                     'and '
                                                                                                                     'model '
                                                                                                                     'from '
                                                                                                                     'args',
 "spec.scorers[0]:cel[!has(self.engine) || (!has(self.model) && (!has(self.modelPath) || self.modelPath == ''))]": 'scorers[].engine: '
                                                                                                                   'the '
                                                                                                                   "engine's "
                                                                                                                   'weights '
                                                                                                                   'go '
                                                                                                                   'in '
                                                                                                                   'engine.model, '
                                                                                                                   'not '
                                                                                                                   'in '
                                                                                                                   'the '
                                                                                                                   "scorer's "
                                                                                                                   'model '
                                                                                                                   'or '
                                                                                                                   'modelPath',
 "spec.scorers[0]:cel[!has(self.name) || self.name != 'hps' || !has(self.args) || !has(self.args.version) || self.args.version in ['v2.1', 'v2.0']]": 'a '
                                                                                                                                                      'scorers '
                                                                                                                                                      'entry '
                                                                                                                                                      'named '
                                                                                                                                                      'hps: '
                                                                                                                                                      'args.version '
                                                                                                                                                      'is '
                                                                                                                                                      'v2.1 '
                                                                                                                                                      '(the '
                                                                                                                                                      'default) '
                                                                                                                                                      'or '
                                                                                                                                                      'v2.0',
 'spec.scorers[0].name:pattern': '^[a-z][a-z0-9-]*$',
 'spec.scorers[0].name:maxLength': 63,
 'spec.scorers[0].class:pattern': '^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_]*$',
 'spec.scorers[0].args:cel[!has(self.api_key) && !has(self.apiKey) && !has(self.token) && !has(self.password)]': 'a '
                                                                                                                 'key '
                                                                                                                 'never '
                                                                                                                 'goes '
                                                                                                                 'in '
                                                                                                                 'args '
                                                                                                                 '(anyone '
                                                                                                                 'who '
                                                                                                                 'can '
                                                                                                                 'read '
                                                                                                                 'the '
                                                                                                                 'pool '
                                                                                                                 'sees '
                                                                                                                 'it): '
                                                                                                                 'put '
                                                                                                                 'it '
                                                                                                                 'in '
                                                                                                                 'a '
                                                                                                                 'Secret '
                                                                                                                 'and '
                                                                                                                 'name '
                                                                                                                 'it '
                                                                                                                 'in '
                                                                                                                 'apiKeySecret',
 'spec.scorers[0].args.base_url:pattern': '^https?://[^\\s]+$',
 'spec.scorers[0].args.model:minLength': 1,
 'spec.scorers[0].apiKeySecret:required=name': True,
 'spec.scorers[0].apiKeySecret.name:minLength': 1,
 'spec.scorers[0].apiKeySecret.name:maxLength': 253,
 'spec.scorers[0].apiKeySecret.key:minLength': 1,
 'spec.scorers[0].apiKeySecret.key:maxLength': 253,
 'spec.scorers[0].engine:required=kind': True,
 'spec.scorers[0].engine:required=model': True,
 "spec.scorers[0].engine:cel[self.kind != 'llamacpp' || has(self.modelFile)]": 'scorer.engine.modelFile: '
                                                                               'llamacpp serves one GGUF '
                                                                               'file: name it under the '
                                                                               'model source',
 'spec.scorers[0].engine:cel[!has(self.tensorParallel) || !has(self.gpus) || self.gpus == 0 || self.tensorParallel <= self.gpus]': 'scorer.engine.tensorParallel '
                                                                                                                                   'is '
                                                                                                                                   'more '
                                                                                                                                   'than '
                                                                                                                                   'its '
                                                                                                                                   'GPUs',
 'spec.scorers[0].engine.kind:enum': ['vllm', 'sglang', 'llamacpp'],
 'spec.scorers[0].engine.image:minLength': 1,
 'spec.scorers[0].engine.image:maxLength': 1024,
 'spec.scorers[0].engine.model:cel[[has(self.pvc), has(self.image), has(self.cache)].filter(x, x).size() == 1]': 'scorer.engine.model '
                                                                                                                 'names '
                                                                                                                 'exactly '
                                                                                                                 'one '
                                                                                                                 'source: '
                                                                                                                 'pvc, '
                                                                                                                 'image '
                                                                                                                 'or '
                                                                                                                 'cache',
 'spec.scorers[0].engine.model.pvc:required=claimName': True,
 'spec.scorers[0].engine.model.pvc.claimName:minLength': 1,
 'spec.scorers[0].engine.model.pvc.claimName:maxLength': 253,
 'spec.scorers[0].engine.model.pvc.subPath:maxLength': 1024,
 'spec.scorers[0].engine.model.image:required=reference': True,
 'spec.scorers[0].engine.model.image.reference:minLength': 1,
 'spec.scorers[0].engine.model.image.reference:maxLength': 1024,
 'spec.scorers[0].engine.model.image.pullPolicy:enum': ['Always', 'IfNotPresent', 'Never'],
 'spec.scorers[0].engine.model.cache:required=name': True,
 'spec.scorers[0].engine.model.cache.name:minLength': 1,
 'spec.scorers[0].engine.model.cache.name:maxLength': 63,
 'spec.scorers[0].engine.model.cache.subPath:maxLength': 1024,
 'spec.scorers[0].engine.model.cache.placement:enum': ['Required', 'Preferred'],
 'spec.scorers[0].engine.modelFile:minLength': 1,
 'spec.scorers[0].engine.modelFile:maxLength': 1024,
 'spec.scorers[0].engine.modelFile:pattern': '^[^/].*$',
 'spec.scorers[0].engine.servedModelName:minLength': 1,
 'spec.scorers[0].engine.servedModelName:maxLength': 253,
 'spec.scorers[0].engine.args:maxItems': 64,
 'spec.scorers[0].engine.args[0]:maxLength': 4096,
 'spec.scorers[0].engine.gpus:minimum': 0,
 'spec.scorers[0].engine.gpus:maximum': 16,
 'spec.scorers[0].engine.tensorParallel:minimum': 1,
 'spec.scorers[0].engine.tensorParallel:maximum': 16,
 'spec.scorers[0].engine.maxModelLen:minimum': 128,
 'spec.scorers[0].engine.maxModelLen:maximum': 10485760,
 'spec.scorers[0].engine.gpuMemoryUtilization:minimum': 'exclusive 0',
 'spec.scorers[0].engine.gpuMemoryUtilization:maximum': 1,
 'spec.scorers[0].engine.startupSeconds:minimum': 10,
 'spec.scorers[0].engine.startupSeconds:maximum': 86400,
 'spec.scorers[0].numFrames:minimum': 1,
 'spec.scorers[0].numFrames:maximum': 4096,
 'spec.scorers[0].model:cel[[has(self.pvc), has(self.image), has(self.cache)].filter(x, x).size() == 1]': 'scorer.model '
                                                                                                          'names '
                                                                                                          'exactly '
                                                                                                          'one '
                                                                                                          'source: '
                                                                                                          'pvc, '
                                                                                                          'image '
                                                                                                          'or '
                                                                                                          'cache',
 'spec.scorers[0].model.pvc:required=claimName': True,
 'spec.scorers[0].model.pvc.claimName:minLength': 1,
 'spec.scorers[0].model.pvc.claimName:maxLength': 253,
 'spec.scorers[0].model.pvc.subPath:maxLength': 1024,
 'spec.scorers[0].model.image:required=reference': True,
 'spec.scorers[0].model.image.reference:minLength': 1,
 'spec.scorers[0].model.image.reference:maxLength': 1024,
 'spec.scorers[0].model.image.pullPolicy:enum': ['Always', 'IfNotPresent', 'Never'],
 'spec.scorers[0].model.cache:required=name': True,
 'spec.scorers[0].model.cache.name:minLength': 1,
 'spec.scorers[0].model.cache.name:maxLength': 63,
 'spec.scorers[0].model.cache.subPath:maxLength': 1024,
 'spec.scorers[0].model.cache.placement:enum': ['Required', 'Preferred'],
 'spec.scorers[0].modelMemory:pattern': '^[0-9]+(\\.[0-9]+)?([KMGTPE]i|[kMGTPE])?$',
 'spec.scorers[0].key:pattern': '^[a-z][a-z0-9_-]*$',
 'spec.scorers[0].key:maxLength': 63,
 'spec.scorers[0].framesPerForward:minimum': 1,
 'spec.scorers[0].framesPerForward:maximum': 4096,
 'spec.store:required=master': True,
 'spec.store.master:pattern': '^([A-Za-z0-9._-]+:[0-9]{1,5}|etcd://[A-Za-z0-9._-]+:[0-9]{1,5}(;[A-Za-z0-9._-]+:[0-9]{1,5})*)$',
 'spec.store.metricsAddress:pattern': '^[A-Za-z0-9._-]+:[0-9]{1,5}$',
 'spec.store.metadataServer:minLength': 1,
 'spec.store.protocol:enum': ['rdma', 'tcp'],
 'spec.store.devices:maxItems': 64,
 'spec.store.devices[0]:pattern': '^[A-Za-z0-9_.:-]+$',
 'spec.store.segmentSize:pattern': '^(auto|[0-9]+(\\.[0-9]+)?([KMGTPE]i|[kMGTPE])?)$',
 'spec.store.localBufferSize:pattern': '^[0-9]+(\\.[0-9]+)?([KMGTPE]i|[kMGTPE])?$',
 'spec.store.maxRegistrationSize:pattern': '^[0-9]+(\\.[0-9]+)?([KMGTPE]i|[kMGTPE])?$',
 'spec.sizing:required=samplesPerRollout': True,
 'spec.sizing:required=outputBytesPerSample': True,
 'spec.sizing:cel[!has(self.framesPerSample) || !has(self.outputShape) || size(self.outputShape) != 4 || self.outputShape[1] == self.framesPerSample]': 'sizing.framesPerSample '
                                                                                                                                                        'must '
                                                                                                                                                        'equal '
                                                                                                                                                        'the '
                                                                                                                                                        'frame '
                                                                                                                                                        'count '
                                                                                                                                                        'F '
                                                                                                                                                        'of '
                                                                                                                                                        'sizing.outputShape '
                                                                                                                                                        '(C, '
                                                                                                                                                        'F, '
                                                                                                                                                        'H, '
                                                                                                                                                        'W)',
 'spec.sizing.samplesPerRollout:minimum': 1,
 'spec.sizing.outputBytesPerSample:pattern': '^[0-9]+(\\.[0-9]+)?([KMGTPE]i|[kMGTPE])?$',
 'spec.sizing.latentBytesPerSample:pattern': '^[0-9]+(\\.[0-9]+)?([KMGTPE]i|[kMGTPE])?$',
 'spec.sizing.latentRollouts:minimum': 0,
 'spec.sizing.latentRollouts:maximum': 16,
 'spec.sizing.highWatermark:minimum': 'exclusive 0',
 'spec.sizing.highWatermark:maximum': 1,
 'spec.sizing.framesPerSample:minimum': 1,
 'spec.sizing.framesPerSample:maximum': 100000,
 'spec.sizing.outputShape:minItems': 3,
 'spec.sizing.outputShape:maxItems': 4,
 'spec.sizing.outputShape[0]:minimum': 1,
 'spec.placement.rdmaResource.name:pattern': '^([a-z0-9.-]+/)?[A-Za-z0-9_.-]+$',
 'spec.placement.rdmaResource.count:minimum': 0,
 'spec.placement.gpuResource:pattern': '^([a-z0-9.-]+/)?[A-Za-z0-9_.-]+$',
 'spec.network:cel[!(has(self.ipvlan) && has(self.attachment))]': 'set at most one of network.ipvlan '
                                                                  '(operator-managed attachment) or '
                                                                  'network.attachment (existing '
                                                                  'NetworkAttachmentDefinition)',
 'spec.network.ipvlan:required=master': True,
 'spec.network.ipvlan:required=ipam': True,
 'spec.network.ipvlan.master:minLength': 1,
 'spec.network.ipvlan.master:maxLength': 15,
 'spec.network.ipvlan.master:pattern': '^[A-Za-z0-9_.-]+$',
 'spec.network.ipvlan.mode:enum': ['l2', 'l3', 'l3s'],
 'spec.network.ipvlan.mtu:minimum': 576,
 'spec.network.ipvlan.mtu:maximum': 9216,
 'spec.network.ipvlan.ipam:cel[!has(self.range) || isCIDR(self.range)]': 'ipam.range must be a CIDR such as '
                                                                         '192.168.10.0/24',
 'spec.network.ipvlan.ipam:cel[!has(self.subnet) || isCIDR(self.subnet)]': 'ipam.subnet must be a CIDR such '
                                                                           'as 192.168.10.0/24',
 'spec.network.attachment:pattern': '^([a-z0-9-]+/)?[a-z0-9]([-a-z0-9]*[a-z0-9])?$',
 "spec.ray:cel[!has(self.gcsFaultTolerance) || (has(self.address) && self.address != '')]": 'ray.gcsFaultTolerance '
                                                                                            'describes the '
                                                                                            'Ray cluster at '
                                                                                            'ray.address: '
                                                                                            'set ray.address '
                                                                                            '(without it '
                                                                                            'each worker '
                                                                                            'runs a private '
                                                                                            'Ray, which has '
                                                                                            'no GCS to '
                                                                                            'restart)',
 'spec.ray.gcsFaultTolerance.reconnectTimeoutSeconds:minimum': 10,
 'spec.ray.gcsFaultTolerance.reconnectTimeoutSeconds:maximum': 86400,
 'spec.autoscaling:cel[self.minReplicas <= self.maxReplicas]': 'autoscaling.minReplicas must not exceed '
                                                               'autoscaling.maxReplicas',
 'spec.autoscaling.minReplicas:minimum': 0,
 'spec.autoscaling.maxReplicas:minimum': 1,
 'spec.autoscaling.maxReplicas:maximum': 1000,
 'spec.autoscaling.targetQueueDepth:minimum': 1,
 'spec.autoscaling.scaleDownStabilizationSeconds:minimum': 0,
 'spec.autoscaling.scaleDownStabilizationSeconds:maximum': 86400,
 'spec.autoscaling.scaleUp.percent:minimum': 0,
 'spec.autoscaling.scaleUp.percent:maximum': 1000,
 'spec.autoscaling.scaleUp.pods:minimum': 0,
 'spec.autoscaling.scaleUp.pods:maximum': 1000,
 'spec.autoscaling.scaleUp.periodSeconds:minimum': 1,
 'spec.autoscaling.scaleUp.periodSeconds:maximum': 1800,
 'spec.drainTimeoutSeconds:minimum': 0,
 "spec.rollout:cel[!(has(self.maxSurge) && has(self.maxUnavailable) && string(self.maxSurge) in ['0', '0%'] && string(self.maxUnavailable) in ['0', '0%'])]": 'rollout.maxSurge '
                                                                                                                                                              'and '
                                                                                                                                                              'rollout.maxUnavailable '
                                                                                                                                                              'cannot '
                                                                                                                                                              'both '
                                                                                                                                                              'be '
                                                                                                                                                              '0: '
                                                                                                                                                              'a '
                                                                                                                                                              'roll '
                                                                                                                                                              'could '
                                                                                                                                                              'never '
                                                                                                                                                              'start '
                                                                                                                                                              'a '
                                                                                                                                                              'new '
                                                                                                                                                              'worker '
                                                                                                                                                              'nor '
                                                                                                                                                              'stop '
                                                                                                                                                              'an '
                                                                                                                                                              'old '
                                                                                                                                                              'one',
 'spec.rollout.maxSurge:minimum': 0,
 'spec.rollout.maxSurge:pattern': '^[0-9]{1,3}%$',
 'spec.rollout.maxUnavailable:minimum': 0,
 'spec.rollout.maxUnavailable:pattern': '^[0-9]{1,3}%$',
 'spec.rollout.maxVersionSkewSeconds:minimum': 0,
 'spec.rollout.shadowSamples:minimum': 1,
 'spec.rollout.shadowMinCorrelation:minimum': -1,
 'spec.rollout.shadowMinCorrelation:maximum': 1,
 'spec.progressDeadlineSeconds:minimum': 1,
 'spec.podSecurity:enum': ['baseline', 'restricted'],
 'spec.access.tenants:maxItems': 32,
 'spec.access.tenants[0]:required=name': True,
 'spec.access.tenants[0]:required=tokenSecret': True,
 'spec.access.tenants[0].name:maxLength': 63,
 'spec.access.tenants[0].name:pattern': '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$',
 'spec.access.tenants[0].weight:minimum': 1,
 'spec.access.tenants[0].weight:maximum': 100,
 'spec.access.tenants[0].tokenSecret:required=name': True,
 'spec.access.tenants[0].tokenSecret.name:minLength': 1,
 'spec.access.tenants[0].tokenSecret.name:maxLength': 253,
 'spec.access.tenants[0].tokenSecret.key:minLength': 1,
 'spec.access.tenants[0].tokenSecret.key:maxLength': 253,
 "spec.podTemplate.metadata.labels:cel[self.all(k, !k.startsWith('rewardpool.io/') && k != 'app.kubernetes.io/component')]": 'podTemplate '
                                                                                                                             'labels '
                                                                                                                             'cannot '
                                                                                                                             'set '
                                                                                                                             'rewardpool.io/* '
                                                                                                                             'or '
                                                                                                                             'app.kubernetes.io/component: '
                                                                                                                             'the '
                                                                                                                             'operator '
                                                                                                                             'selects '
                                                                                                                             'and '
                                                                                                                             'tells '
                                                                                                                             'its '
                                                                                                                             'pods '
                                                                                                                             'apart '
                                                                                                                             'by '
                                                                                                                             'them',
 "spec.podTemplate.metadata.annotations:cel[self.all(k, !k.startsWith('rewardpool.io/'))]": 'podTemplate '
                                                                                            'annotations '
                                                                                            'cannot set '
                                                                                            'rewardpool.io/*: '
                                                                                            "the operator's "
                                                                                            'drain requests '
                                                                                            'live there',
 "spec.podTemplate.metadata.annotations:cel[self.all(k, !k.startsWith('container.apparmor.security.beta.kubernetes.io/') || self[k] == '' || self[k] == 'runtime/default' || self[k].startsWith('localhost/'))]": 'podTemplate '
                                                                                                                                                                                                                  'annotations '
                                                                                                                                                                                                                  'cannot '
                                                                                                                                                                                                                  'set '
                                                                                                                                                                                                                  'an '
                                                                                                                                                                                                                  'AppArmor '
                                                                                                                                                                                                                  'profile '
                                                                                                                                                                                                                  'other '
                                                                                                                                                                                                                  'than '
                                                                                                                                                                                                                  'runtime/default '
                                                                                                                                                                                                                  'or '
                                                                                                                                                                                                                  'localhost/*: '
                                                                                                                                                                                                                  'Pod '
                                                                                                                                                                                                                  'Security '
                                                                                                                                                                                                                  'baseline '
                                                                                                                                                                                                                  'forbids '
                                                                                                                                                                                                                  'unconfined '
                                                                                                                                                                                                                  'containers',
 'spec.podTemplate.spec:cel[!has(self.hostNetwork) || self.hostNetwork != true]': 'podTemplate.spec.hostNetwork '
                                                                                  'is not allowed: workers '
                                                                                  'use the pod network and '
                                                                                  'the RoCE attachment',
 'spec.podTemplate.spec:cel[!has(self.hostPID) || self.hostPID != true]': 'podTemplate.spec.hostPID is not '
                                                                          'allowed',
 'spec.podTemplate.spec:cel[!has(self.hostIPC) || self.hostIPC != true]': 'podTemplate.spec.hostIPC is not '
                                                                          'allowed',
 'spec.podTemplate.spec:cel[!has(self.nodeName)]': 'podTemplate.spec.nodeName is not allowed: placement goes '
                                                   'through the scheduler (placement.rdmaNodeSelector, '
                                                   'tolerations)',
 'spec.podTemplate.spec:cel[!has(self.serviceAccountName) && !has(self.serviceAccount)]': 'podTemplate.spec.serviceAccountName '
                                                                                          'is not allowed: '
                                                                                          'workers run with '
                                                                                          'no Kubernetes '
                                                                                          'identity',
 'spec.podTemplate.spec:cel[!has(self.automountServiceAccountToken) || self.automountServiceAccountToken != true]': 'podTemplate.spec.automountServiceAccountToken '
                                                                                                                    'is '
                                                                                                                    'not '
                                                                                                                    'allowed: '
                                                                                                                    'workers '
                                                                                                                    'get '
                                                                                                                    'no '
                                                                                                                    'API '
                                                                                                                    'token',
 "spec.podTemplate.spec.securityContext:cel[!has(self.seccompProfile) || !has(self.seccompProfile.type) || self.seccompProfile.type != 'Unconfined']": 'the '
                                                                                                                                                       "pod's "
                                                                                                                                                       'seccompProfile '
                                                                                                                                                       'Unconfined '
                                                                                                                                                       'is '
                                                                                                                                                       'not '
                                                                                                                                                       'allowed: '
                                                                                                                                                       'Pod '
                                                                                                                                                       'Security '
                                                                                                                                                       'baseline '
                                                                                                                                                       'needs '
                                                                                                                                                       'RuntimeDefault '
                                                                                                                                                       'or '
                                                                                                                                                       'Localhost',
 "spec.podTemplate.spec.securityContext:cel[!has(self.appArmorProfile) || !has(self.appArmorProfile.type) || self.appArmorProfile.type != 'Unconfined']": 'the '
                                                                                                                                                          "pod's "
                                                                                                                                                          'appArmorProfile '
                                                                                                                                                          'Unconfined '
                                                                                                                                                          'is '
                                                                                                                                                          'not '
                                                                                                                                                          'allowed: '
                                                                                                                                                          'Pod '
                                                                                                                                                          'Security '
                                                                                                                                                          'baseline '
                                                                                                                                                          'needs '
                                                                                                                                                          'RuntimeDefault '
                                                                                                                                                          'or '
                                                                                                                                                          'Localhost',
 'spec.podTemplate.spec.containers[0].ports[0]:cel[!has(self.hostPort) || self.hostPort == 0]': 'hostPort is '
                                                                                                'not allowed '
                                                                                                'in worker '
                                                                                                'pods (Pod '
                                                                                                'Security '
                                                                                                'baseline): '
                                                                                                'reach a '
                                                                                                'sidecar '
                                                                                                'through the '
                                                                                                'pod IP',
 'spec.podTemplate.spec.containers[0].securityContext:cel[!has(self.privileged) || !self.privileged]': 'privileged '
                                                                                                       'containers '
                                                                                                       'are '
                                                                                                       'not '
                                                                                                       'allowed '
                                                                                                       'in '
                                                                                                       'worker '
                                                                                                       'pods '
                                                                                                       '(Pod '
                                                                                                       'Security '
                                                                                                       'baseline; '
                                                                                                       'the '
                                                                                                       'worker '
                                                                                                       'gets '
                                                                                                       'IPC_LOCK '
                                                                                                       'and '
                                                                                                       'nothing '
                                                                                                       'more)',
 "spec.podTemplate.spec.containers[0].securityContext:cel[!has(self.seccompProfile) || !has(self.seccompProfile.type) || self.seccompProfile.type != 'Unconfined']": 'a '
                                                                                                                                                                     "container's "
                                                                                                                                                                     'seccompProfile '
                                                                                                                                                                     'Unconfined '
                                                                                                                                                                     'is '
                                                                                                                                                                     'not '
                                                                                                                                                                     'allowed: '
                                                                                                                                                                     'Pod '
                                                                                                                                                                     'Security '
                                                                                                                                                                     'baseline '
                                                                                                                                                                     'needs '
                                                                                                                                                                     'RuntimeDefault '
                                                                                                                                                                     'or '
                                                                                                                                                                     'Localhost',
 "spec.podTemplate.spec.containers[0].securityContext:cel[!has(self.appArmorProfile) || !has(self.appArmorProfile.type) || self.appArmorProfile.type != 'Unconfined']": 'a '
                                                                                                                                                                        "container's "
                                                                                                                                                                        'appArmorProfile '
                                                                                                                                                                        'Unconfined '
                                                                                                                                                                        'is '
                                                                                                                                                                        'not '
                                                                                                                                                                        'allowed: '
                                                                                                                                                                        'Pod '
                                                                                                                                                                        'Security '
                                                                                                                                                                        'baseline '
                                                                                                                                                                        'needs '
                                                                                                                                                                        'RuntimeDefault '
                                                                                                                                                                        'or '
                                                                                                                                                                        'Localhost',
 'spec.podTemplate.spec.initContainers[0].ports[0]:cel[!has(self.hostPort) || self.hostPort == 0]': 'hostPort '
                                                                                                    'is not '
                                                                                                    'allowed '
                                                                                                    'in '
                                                                                                    'worker '
                                                                                                    'pods '
                                                                                                    '(Pod '
                                                                                                    'Security '
                                                                                                    'baseline): '
                                                                                                    'reach a '
                                                                                                    'sidecar '
                                                                                                    'through '
                                                                                                    'the pod '
                                                                                                    'IP',
 'spec.podTemplate.spec.initContainers[0].securityContext:cel[!has(self.privileged) || !self.privileged]': 'privileged '
                                                                                                           'containers '
                                                                                                           'are '
                                                                                                           'not '
                                                                                                           'allowed '
                                                                                                           'in '
                                                                                                           'worker '
                                                                                                           'pods '
                                                                                                           '(Pod '
                                                                                                           'Security '
                                                                                                           'baseline; '
                                                                                                           'the '
                                                                                                           'worker '
                                                                                                           'gets '
                                                                                                           'IPC_LOCK '
                                                                                                           'and '
                                                                                                           'nothing '
                                                                                                           'more)',
 "spec.podTemplate.spec.initContainers[0].securityContext:cel[!has(self.seccompProfile) || !has(self.seccompProfile.type) || self.seccompProfile.type != 'Unconfined']": 'a '
                                                                                                                                                                         "container's "
                                                                                                                                                                         'seccompProfile '
                                                                                                                                                                         'Unconfined '
                                                                                                                                                                         'is '
                                                                                                                                                                         'not '
                                                                                                                                                                         'allowed: '
                                                                                                                                                                         'Pod '
                                                                                                                                                                         'Security '
                                                                                                                                                                         'baseline '
                                                                                                                                                                         'needs '
                                                                                                                                                                         'RuntimeDefault '
                                                                                                                                                                         'or '
                                                                                                                                                                         'Localhost',
 "spec.podTemplate.spec.initContainers[0].securityContext:cel[!has(self.appArmorProfile) || !has(self.appArmorProfile.type) || self.appArmorProfile.type != 'Unconfined']": 'a '
                                                                                                                                                                            "container's "
                                                                                                                                                                            'appArmorProfile '
                                                                                                                                                                            'Unconfined '
                                                                                                                                                                            'is '
                                                                                                                                                                            'not '
                                                                                                                                                                            'allowed: '
                                                                                                                                                                            'Pod '
                                                                                                                                                                            'Security '
                                                                                                                                                                            'baseline '
                                                                                                                                                                            'needs '
                                                                                                                                                                            'RuntimeDefault '
                                                                                                                                                                            'or '
                                                                                                                                                                            'Localhost',
 'spec.podTemplate.spec.volumes[0]:cel[!has(self.hostPath)]': 'hostPath volumes are not allowed in worker '
                                                              'pods (Pod Security baseline; RDMA devices '
                                                              'come from the device plugin resource)',
 'status.roll.phase:enum': ['Shadow', 'Replacing'],
 'status.conditions[0]:required=type': True,
 'status.conditions[0]:required=status': True,
 'status.conditions[0].status:enum': ['True', 'False', 'Unknown']}
