"""演示模型的训练脚本：几秒钟的试跑（很小的模型、几十步），损失在降，冻住的嵌入行一个字节都没变
（脚本自己检查），写出的权重只有改过的部分，拼回去的模型 transformers 能直接用。"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import make_tiny_model as tiny  # noqa: E402
import train_chat_model  # noqa: E402


def test_smoke_run_learns_and_writes_only_what_training_changed(tmp_path: Path) -> None:
    from safetensors.numpy import load_file

    argv = ["--out", str(tmp_path), "--size", "smoke", "--minutes", "0", "--steps", "24"]
    argv += ["--batch", "8", "--eval", "2", "--vocab-sample", "200", "--log-every", "1"]
    train_chat_model.main([*argv, "--workers", "1", "--device", "cpu"])
    log = json.loads((tmp_path / "train_log.json").read_text())
    losses = [loss for _, loss in log["loss"]]
    assert len(losses) == 24 and log["steps"] == 24
    assert sum(losses[-4:]) / 4 < sum(losses[:4]) / 4 - 0.2
    assert set(log["accuracy"]) == set(train_chat_model.TASKS)

    stored = load_file(str(tmp_path / "weights.safetensors"))
    rows = stored[tiny.ROW_IDS_NAME]
    assert 0 < len(rows) == log["trainable_rows"] < 20000
    assert stored[tiny.EMBED_NAME].shape == (len(rows), 32)
    assert all(v.dtype == np.float16 for k, v in stored.items() if k != tiny.ROW_IDS_NAME)
    config = train_chat_model.smoke_config()
    full = tiny.assemble_trained(config, 0, tmp_path / "weights.safetensors")
    untouched = np.ones(config["vocab_size"], dtype=bool)
    untouched[rows] = False
    initial = tiny.initial_embedding(config, 0)
    assert np.array_equal(full[tiny.EMBED_NAME][untouched], initial[untouched])
    assert not np.array_equal(full[tiny.EMBED_NAME][rows], initial[rows])


def test_batches_are_deterministic_and_mask_the_prompt() -> None:
    import random

    enc = train_chat_model.Encoder()
    a = train_chat_model.make_batch(enc, random.Random(3), 16)
    b = train_chat_model.make_batch(enc, random.Random(3), 16)
    assert all(x.equal(y) for x, y in zip(a, b))
    ids, mask, target = a
    for row in range(16):
        answer = (target[row] != -100).nonzero().flatten()
        # 目标是下一个 token，最后一个目标是 <|im_end|>，之前的位置（提示）都不算损失
        assert target[row, answer[-1]] == tiny.IM_END_ID
        assert ids[row, answer[0] + 1 : answer[-1] + 2].tolist() == target[row, answer].tolist()
        assert mask[row, : answer[-1] + 2].all()


def test_render_is_the_chat_template() -> None:
    """训练时手写的对话格式，必须和服务里 ``apply_chat_template`` 渲染出的逐字相同：
    带不带系统提示、带不带 enable_thinking=False 的空思考块都一样。"""
    from chat_curriculum import make_examples
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny.DEFAULT_OUT / "demo-chat")
    example = make_examples(1, "sort", 1)[0]
    for system in (None, train_chat_model.SYSTEM_PROMPTS[0]):
        for empty_think in (False, True):
            messages = [{"role": "user", "content": example.prompt}]
            if system:
                messages.insert(0, {"role": "system", "content": system})
            extra = {"enable_thinking": False} if empty_think else {}
            want = tok.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=True, **extra
            )
            prompt, answer = train_chat_model.render(example, system, empty_think)
            assert prompt == want
            assert answer == example.answer + "<|im_end|>"
