"""A tiny judge model for a real inference engine on CPU: a llama-architecture GGUF (64 wide, 2 layers, a
byte-level SentencePiece vocabulary) written with the `gguf` package from seeded random weights, no download.

Its weights are random, with one thing arranged so that a judge's protocol is deterministic: one dimension of the
residual stream is a large constant, and the output head's rows for the judge's answer tokens lean on it. So the
next token is nearly always one of them, in a fixed order of preference (`Yes` over `No`; in JSON, `3`, then `}`),
while the rest of each row is random: the probabilities still move a little with the prompt. A greedy JSON answer
constrained to {"score": number} comes out as {"score": 3}; P("Yes") over Yes/No is a number strictly inside (0, 1)
that depends on the prompt.

    python -m rewardpool_devcluster.tiny_judge OUT.gguf"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

WIDTH, LAYERS, HEADS, FFN, CONTEXT = 64, 2, 4, 128, 2048
WORDS = ["Yes", "No", "▁Yes", "▁No", "yes", "no", "score", "▁score"]
# output-head lean of each answer token (the dimension-0 weight): the order a greedy decode prefers them in
LEAN = {"Yes": 1.0, "No": 0.9, "▁Yes": 0.6, "▁No": 0.55, "3": 1.2, "}": 1.1, "{": 0.5, '"': 0.5, ":": 0.4,
        "score": 0.45, "2": 0.3, "4": 0.3}
CONSTANT = 8.0  # the residual stream's constant dimension
# ChatML, where a message's content may be a list of parts (OpenAI's form, which llama-cpp-python's built-in chatml
# format drops): text parts as they are, and an image part as the first bytes of its data URL's PNG, so a model that
# reads only text still answers each image differently.
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for p in m['content'] %}"
    "{% if p['type'] == 'text' %}{{ p['text'] }}{% elif p['type'] == 'image_url' %}"
    "{{ (p['image_url']['url'] if p['image_url'] is mapping else p['image_url'])[22:300] }}{% endif %}"
    "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def vocabulary() -> tuple[list[str], list[float], list[int]]:
    """(tokens, scores, types): <unk> <s> </s>, the 256 byte tokens, the printable ASCII characters as pieces,
    and a few whole words."""
    import gguf

    tokens = ["<unk>", "<s>", "</s>"]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    tokens += [f"<0x{b:02X}>" for b in range(256)]
    types += [gguf.TokenType.BYTE] * 256
    pieces = [chr(c) for c in range(33, 127)] + ["▁"] + WORDS
    tokens += pieces
    types += [gguf.TokenType.NORMAL] * len(pieces)
    scores = [0.0] * 259 + [-float(i) for i in range(len(pieces))]
    return tokens, scores, [int(t) for t in types]


def write(path: str | Path, seed: int = 0) -> Path:
    import gguf

    rng = np.random.default_rng(seed)
    tokens, scores, types = vocabulary()
    vocab = len(tokens)
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("rewardpool-tiny-judge")
    w.add_context_length(CONTEXT)
    w.add_embedding_length(WIDTH)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(HEADS)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(WIDTH // HEADS)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)

    def rand(*shape, std=0.02):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    embd = rand(vocab, WIDTH, std=0.1)
    embd[:, 0] = CONSTANT
    head = rand(vocab, WIDTH, std=0.02)
    head[:, 0] = 0.0
    index = {t: i for i, t in enumerate(tokens)}
    for token, lean in LEAN.items():
        head[index[token], 0] = lean
        head[index[token], 1:] = rand(WIDTH - 1, std=0.3)
    w.add_tensor("token_embd.weight", embd)
    w.add_tensor("output_norm.weight", np.ones(WIDTH, np.float32))
    w.add_tensor("output.weight", head)
    for n in range(LAYERS):
        w.add_tensor(f"blk.{n}.attn_norm.weight", np.ones(WIDTH, np.float32))
        for part in ("q", "k", "v", "output"):
            w.add_tensor(f"blk.{n}.attn_{part}.weight", rand(WIDTH, WIDTH, std=0.05))
        w.add_tensor(f"blk.{n}.ffn_norm.weight", np.ones(WIDTH, np.float32))
        w.add_tensor(f"blk.{n}.ffn_gate.weight", rand(FFN, WIDTH, std=0.05))
        w.add_tensor(f"blk.{n}.ffn_up.weight", rand(FFN, WIDTH, std=0.05))
        w.add_tensor(f"blk.{n}.ffn_down.weight", rand(WIDTH, FFN, std=0.05))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return Path(path)


if __name__ == "__main__":
    print(write(sys.argv[1]))


def local_command(pool, index: int, model_dir: str | Path, port: int) -> list[str]:
    """The command the operator renders for engine `index` of `pool`'s worker pods, to run here: python3 as this
    interpreter, the model's folder `model_dir` and the port `port` (the pod's loopback port is the test's own)."""
    from rewardpool_operator.pool import builders, engine, sizing

    pod = builders.pod_template(pool, sizing.compute(pool.spec))
    (c,) = [c for c in pod["spec"]["containers"] if c["name"] == engine.container_name(index)]
    component = engine.hosted(pool)[index][1]
    where, rendered_port = engine.model_dir(component), str(engine.port(index))
    return [sys.executable if a == "python3" else str(model_dir) + a[len(where):] if a.startswith(where)
            else str(port) if a == rendered_port else a for a in c["command"]]
