"""第 5 章：贪心生成——和 transformers 逐步对照（prefill 与每一步 decode 的 logits、生成的 token），
页大小不改变结果，长短不一的两段提示拼成一批与各自单独生成相同，停止符只结束自己那个请求，
放不下时报错。

near-tie：随机权重的小模型偶尔有两个 token 的 logit 几乎一样大，两边 1e-5 量级的浮点误差就能
让第一名易主。所以只在 HF 的第一名领先第二名超过 ``NEAR_TIE`` 时比较 token，遇到 near-tie 就停，
并要求停之前至少比较了 ``MIN_COMPARED`` 步——不然这个测试什么也没证明。

演示模型 demo-chat（训练过，会答题）：用聊天模板包好的问题，和 transformers 自己的 ``generate``
贪心生成逐个 token 比较到结束符为止（同样的 near-tie 保护），答案还得是标准答案。
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pytest
import torch
from transformers import AutoModelForCausalLM, PreTrainedModel

from minisgl.attention import create_attention_backend, page_slots, prepare_batch
from minisgl.core import Batch, Context, Req, reset_global_ctx, set_global_ctx
from minisgl.distributed import reset_tp_info
from minisgl.kvcache import create_kvcache_pool
from minisgl.models import load_model
from minisgl.models.base import BaseLLMModel, lm_head_rows
from minisgl.models.utils import greedy_generate
from minisgl.utils import load_tokenizer

DENSE = ["tiny-qwen3", "tiny-llama"]
STEPS = 40
MIN_COMPARED = 32
NEAR_TIE = 1e-3
ATOL = 5e-4  # logits 的标准差约 8、最大约 40；float32 下两边各自离 float64 的真值 ~5e-5
# "The capital of France is"，以及聊天模板包好的"用一句话介绍一下你自己。"（main 里的那段）
SHORT = [785, 6722, 315, 9625, 374]
CHAT = [151644, 872, 198, 11622, 105321, 109432, 107828, 1773, 151645, 198, 151644, 77091, 198]
CHAT += [151667, 271, 151668, 271]
# 演示模型的问题和标准答案（第 5 章 main 里问的那几个里挑的）
DEMO_QUESTIONS = [
    ("What is 1234 + 567?", "1234 + 567 = 1801"),
    ("25 减 9000 等于多少？", "25 - 9000 = -(9000 - 25) = -8975"),
    ("排序：42 7 19", "7 19 42"),
    ("Reverse: 3 14 15 92", "92 15 14 3"),
]
DEMO_STEPS = 48  # 最长的答案也不到 30 个 token
DEMO_MIN_COMPARED = 8  # 最短的答案（"7 19 42" 加结束符）正好 8 个 token

Models = dict[str, tuple[BaseLLMModel, PreTrainedModel]]


@pytest.fixture(autouse=True)
def clean_state() -> Iterator[None]:
    reset_global_ctx()
    reset_tp_info()
    yield
    reset_global_ctx()
    reset_tp_info()


@pytest.fixture(scope="module")
def models(models_dir: Path) -> Models:
    """我们的模型和 transformers 的模型，同一份权重，float32，CPU。"""
    out = {}
    for name in DENSE:
        ours = load_model(models_dir / name, device="cpu", dtype=torch.float32)
        hf = AutoModelForCausalLM.from_pretrained(models_dir / name, dtype=torch.float32)
        out[name] = (ours, hf.eval())
    return out


def make_ctx(
    model: BaseLLMModel, page_size: int, rows: int = 2, columns: int = 128, num_pages: int = 0
) -> Context:
    num_pages = num_pages or rows * columns // page_size
    pool = create_kvcache_pool(model.config, num_pages, page_size, torch.float32, "cpu")
    table = torch.zeros(rows, columns, dtype=torch.int32)
    backend = create_attention_backend("torch", model.config, pool, table)
    ctx = Context(page_table=table, kv_cache=pool, attn_backend=backend)
    reset_global_ctx()
    set_global_ctx(ctx)
    return ctx


@torch.no_grad()
def hf_greedy(hf: PreTrainedModel, prompt: list[int], steps: int) -> tuple[list[int], torch.Tensor]:
    """参照答案：每一步把整段序列送进 transformers（不用缓存），取最后一个位置的 logits。"""
    ids = torch.tensor([prompt])
    rows = []
    for _ in range(steps):
        logits = hf(ids).logits[0, -1]
        rows.append(logits)
        ids = torch.cat([ids, logits.argmax().reshape(1, 1)], dim=1)
    return ids[0, len(prompt) :].tolist(), torch.stack(rows)


@pytest.mark.parametrize("prompt", [SHORT, CHAT], ids=["short", "chat"])
@pytest.mark.parametrize("name", DENSE)
def test_matches_transformers_step_by_step(models: Models, name: str, prompt: list[int]) -> None:
    ours, hf = models[name]
    make_ctx(ours, page_size=4)
    out = greedy_generate(ours, [prompt], STEPS, keep_logits=True)
    want_tokens, want_logits = hf_greedy(hf, prompt, STEPS)
    assert out.logits[0].shape == want_logits.shape == (STEPS, ours.config.vocab_size)
    compared, worst = 0, 0.0
    for k in range(STEPS):
        # 到第 k 步为止两边的序列相同，第 k 步的 logits 可以直接比（第 0 步是 prefill）
        diff = (out.logits[0][k] - want_logits[k]).abs().max().item()
        worst = max(worst, diff)
        assert diff < ATOL, f"step {k}: max |Δlogit| = {diff:.2e}"
        top2 = want_logits[k].topk(2).values
        if top2[0] - top2[1] <= NEAR_TIE:
            break  # 谁排第一都说得过去，之后两边可能合理地分岔
        assert out.token_ids[0][k] == want_tokens[k], f"step {k}"
        compared += 1
    print(f"{name}: {compared} tokens compared, max |Δlogit| = {worst:.2e}")
    assert compared >= MIN_COMPARED


@pytest.mark.parametrize("name", DENSE)
def test_page_size_does_not_change_the_result(models: Models, name: str) -> None:
    model = models[name][0]
    results = {}
    for page_size in (1, 4, 16):
        make_ctx(model, page_size)
        results[page_size] = greedy_generate(model, [CHAT, SHORT], 12, keep_logits=True)
    for page_size in (4, 16):
        assert results[page_size].token_ids == results[1].token_ids
        for got, want in zip(results[page_size].logits, results[1].logits):
            # 每个 token 读到的 K/V 和计算顺序都没变：逐位相同
            assert torch.equal(got, want)


@pytest.mark.parametrize("name", DENSE)
def test_ragged_batch_matches_each_prompt_alone(models: Models, name: str) -> None:
    model = models[name][0]
    make_ctx(model, page_size=4)
    both = greedy_generate(model, [CHAT, SHORT], 12, keep_logits=True)
    assert len(both.step_seconds) == 12  # 一次 prefill（两段提示一起）+ 11 次 decode
    for i, prompt in enumerate([CHAT, SHORT]):
        make_ctx(model, page_size=4)
        alone = greedy_generate(model, [prompt], 12, keep_logits=True)
        assert both.token_ids[i] == alone.token_ids[0]
        # 批次里矩阵乘的行数不同，累加的顺序可能不同：只允许浮点舍入级别（~4e-5）的差别
        torch.testing.assert_close(both.logits[i], alone.logits[0], rtol=0, atol=1e-4)


def test_lm_head_only_computes_the_last_token_of_each_prompt(models: Models) -> None:
    model = models["tiny-qwen3"][0]
    ctx = make_ctx(model, page_size=4)
    reqs = [Req(torch.tensor(CHAT, dtype=torch.int32), table_idx=0)]
    reqs.append(Req(torch.tensor(SHORT, dtype=torch.int32), table_idx=1))
    ctx.page_table[0, : len(CHAT)] = page_slots(range(5), 4, len(CHAT))
    ctx.page_table[1, : len(SHORT)] = page_slots(range(5, 7), 4, len(SHORT))
    batch = prepare_batch(Batch(reqs, "prefill"), ctx.page_table)
    ctx.attn_backend.prepare_metadata(batch)
    rows = lm_head_rows(batch)
    assert rows is not None and rows.tolist() == [len(CHAT) - 1, len(CHAT) + len(SHORT) - 1]
    with ctx.forward_batch(batch):
        logits = model.forward()
    assert logits.shape == (2, model.config.vocab_size)
    for r in reqs:
        r.append_host(int(logits[r.table_idx].argmax()))
        r.complete_one()
    decode = prepare_batch(Batch(reqs, "decode"), ctx.page_table)
    ctx.attn_backend.prepare_metadata(decode)
    assert lm_head_rows(decode) is None  # decode：每个请求本来就只有一行


def test_stop_token_ends_only_its_own_request(models: Models) -> None:
    model = models["tiny-qwen3"][0]
    make_ctx(model, page_size=4)
    full = greedy_generate(model, [CHAT, SHORT], 10).token_ids
    stop = full[0][3]
    first = full[0].index(stop)
    assert stop not in full[1]
    make_ctx(model, page_size=4)
    out = greedy_generate(model, [CHAT, SHORT], 10, stop_token_ids={stop})
    assert out.token_ids[0] == full[0][: first + 1]  # 停止符本身算在输出里
    assert out.token_ids[1] == full[1]  # 另一个请求不受影响，继续生成到 10 个
    assert len(out.step_seconds) == 10


def test_rejects_requests_that_do_not_fit(models: Models) -> None:
    model = models["tiny-qwen3"][0]
    make_ctx(model, page_size=4, rows=2, columns=32, num_pages=8)
    with pytest.raises(ValueError, match="max_new_tokens"):
        greedy_generate(model, [SHORT], 0)
    with pytest.raises(ValueError, match="prompts"):
        greedy_generate(model, [SHORT, SHORT, SHORT], 4)
    with pytest.raises(ValueError, match="32 columns"):
        greedy_generate(model, [list(range(30))], 4)  # 30 + 4 个 token，页表一行只有 32 列
    with pytest.raises(ValueError, match="pages are left"):
        greedy_generate(model, [SHORT, list(range(20))], 4)  # 3 页 + 6 页 > 8 页


@pytest.fixture(scope="module")
def demo(demo_chat: Path) -> tuple[BaseLLMModel, PreTrainedModel, Any]:
    """演示模型：我们的、transformers 的，和它的分词器（带聊天模板）。"""
    ours = load_model(demo_chat, device="cpu", dtype=torch.float32)
    hf = AutoModelForCausalLM.from_pretrained(demo_chat, dtype=torch.float32).eval()
    return ours, hf, load_tokenizer(demo_chat)


@pytest.mark.parametrize(("question", "expected"), DEMO_QUESTIONS)
def test_demo_chat_matches_transformers_generate(
    demo: tuple[BaseLLMModel, PreTrainedModel, Any], question: str, expected: str
) -> None:
    ours, hf, tokenizer = demo
    messages = [{"role": "user", "content": question}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    prompt = tokenizer.encode(text, add_special_tokens=False)
    eos = tokenizer.eos_token_id
    with torch.no_grad():
        want = hf.generate(
            torch.tensor([prompt]),
            max_new_tokens=DEMO_STEPS,
            do_sample=False,
            eos_token_id=eos,
            pad_token_id=eos,
            output_logits=True,
            return_dict_in_generate=True,
        )
    want_tokens = want.sequences[0, len(prompt) :].tolist()
    want_logits = torch.cat(want.logits).float()
    assert want_tokens[-1] == eos  # transformers 在答案结束的地方停下
    make_ctx(ours, page_size=4)
    out = greedy_generate(ours, [prompt], DEMO_STEPS, stop_token_ids={eos}, keep_logits=True)
    got_tokens = out.token_ids[0]
    compared, tie = 0, False
    for k in range(min(len(got_tokens), len(want_tokens))):
        diff = (out.logits[0][k] - want_logits[k]).abs().max().item()
        assert diff < ATOL, f"step {k}: max |Δlogit| = {diff:.2e}"
        top2 = want_logits[k].topk(2).values
        if top2[0] - top2[1] <= NEAR_TIE:
            tie = True
            break  # 谁排第一都说得过去，之后两边可能合理地分岔
        assert got_tokens[k] == want_tokens[k], f"step {k}"
        compared += 1
    assert compared >= DEMO_MIN_COMPARED
    if not tie:  # 整段答案（连同结束符）逐个 token 相同，而且答对了
        assert got_tokens == want_tokens
        assert tokenizer.decode(got_tokens, skip_special_tokens=True) == expected
