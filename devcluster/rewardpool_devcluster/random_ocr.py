"""PaddleOCR models for tests, benchmarks and the demo, built here (nothing can be downloaded): small paddle.nn
networks with PaddleOCR 2.x's inference contract, exported with `paddle.jit.save` to the format `PaddleOCR`
loads from `det_model_dir`, `rec_model_dir` and `cls_model_dir` (inference.pdmodel + inference.pdiparams).
PaddleOCR's pip package (2.7 to 2.10, wheels and sdist) ships no network code (`ppocr/modeling` is absent), so
these are not PP-OCRv4's architectures; they run through PaddleOCR's real pipeline (resizing, DB
post-processing, crops, CTC decoding with the English dictionary, the drop_score filter) all the same:

- det: a DB probability map (N, 1, H, W) that is high where the image is bright (a fixed filter: text drawn
  light on dark is found, in boxes DB's post-processing keeps);
- rec: random convolutions (and each step's mean colour) and a random classifier over CTC's classes (blank, en_dict's 95 characters, space),
  its logits scaled so the decoded characters are confident (PaddleOCR drops lines under 0.5): each crop reads as
  a deterministic string of characters, which the OCR reward then compares with the prompt's target;
- cls: a 2-class angle head (PaddleOCR 2.x loads it even with use_angle_cls=False)."""
from __future__ import annotations

from pathlib import Path

# at module level: paddle's dy2static re-compiles forward() against the module's globals
import paddle
from paddle import nn
from paddle.static import InputSpec

REC_CLASSES = 1 + 95 + 1  # CTC blank, paddleocr/ppocr/utils/en_dict.txt, the space (use_space_char)


def build(path: Path, seed: int = 0) -> Path:
    """Write det/, rec/ and cls/ under `path`; returns `path` (the ocr scorer's modelPath)."""
    paddle.seed(seed)
    paddle.set_device("cpu")

    class Det(nn.Layer):
        def __init__(self):
            super().__init__()
            # the channels' mean, less 0.5 (x is normalised with ImageNet's mean and std: white is about 2,
            # black about -2), times 8: a fixed filter, as parameters so the export writes its .pdiparams
            self.conv = nn.Conv2D(3, 1, 1)
            self.conv.weight.set_value(paddle.full([1, 3, 1, 1], 8.0 / 3))
            self.conv.bias.set_value(paddle.full([1], -4.0))

        def forward(self, x):
            return nn.functional.sigmoid(self.conv(x))

    class Rec(nn.Layer):
        def __init__(self):
            super().__init__()
            self.convs = nn.Sequential(
                nn.Conv2D(3, 16, 3, stride=(2, 2), padding=1), nn.ReLU(),  # 48 x W -> 24 x W/2
                nn.Conv2D(16, 32, 3, stride=(2, 2), padding=1), nn.ReLU())  # -> 12 x W/4
            self.fc = nn.Linear(32 + 3, REC_CLASSES)

        def forward(self, x):
            f = self.convs(x).mean(axis=2)  # (N, 32, T): one step per 4 columns
            # and each step's mean colour, so what a line reads depends on its colours too (RGB is not BGR)
            colour = nn.functional.avg_pool1d(x.mean(axis=2), 4, 4, ceil_mode=True)  # (N, 3, T)
            f = paddle.concat([f, 30.0 * colour], axis=1).transpose([0, 2, 1])
            return nn.functional.softmax(40.0 * self.fc(f), axis=2)

    class Cls(nn.Layer):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 2)

        def forward(self, x):
            return nn.functional.softmax(self.fc(x.mean(axis=[2, 3])), axis=1)

    spec = [InputSpec([None, 3, None, None], "float32", name="x")]
    for name, layer in (("det", Det()), ("rec", Rec()), ("cls", Cls())):
        layer.eval()
        (path / name).mkdir(parents=True, exist_ok=True)
        paddle.jit.save(layer, str(path / name / "inference"), input_spec=spec)
    return path
