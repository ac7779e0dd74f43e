"""第 16 章：完整的 OpenAI 接口。

前半部分不起服务：停止串（跨段、扣住、和分段方式无关）、带 seed 的采样（和批次无关、分布正确）、
Prometheus 文本格式、请求体的校验、新字段沿消息链原样传递、调度器报告的用量。
后半部分起一个真的服务（tiny 模型、CPU）：usage 和 finish_reason 与 transformers 的参照一致，
流式与非流式一致，停止串不漏出、命中后中止后端，seed 可复现，各种坏请求得到 400/413，
``/metrics`` 的计数和空闲时的账目。
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch

NUM_PAGES, MAX_SEQ_LEN, MAX_RUNNING = 512, 512, 16
PROMPT = "The capital of France is"


# ---------------------------------------------------------------- 停止串


def feed_all(stops: list[str], pieces: list[str]) -> tuple[str, str | None]:
    from minisgl.server.stop import StopChecker

    checker = StopChecker(stops)
    out = ""
    for piece in pieces:
        out += checker.feed(piece)
        if checker.matched is not None:
            return out, checker.matched
    return out + checker.flush(), None


def reference_stop(stops: list[str], text: str) -> tuple[str, str | None]:
    """最直接的定义：所有停止串在全文里的出现中，结束位置最靠前的那个（一样时开始得早的）。"""
    best = None
    for s in stops:
        i = text.find(s)
        while i >= 0:
            key = (i + len(s), i)
            if best is None or key < best[0]:
                best = (key, s)
            i = text.find(s, i + 1)
    if best is None:
        return text, None
    return text[: best[0][1]], best[1]


def test_stop_across_pieces_never_leaks() -> None:
    from minisgl.server.stop import StopChecker

    checker = StopChecker(["Observation:"])
    assert checker.feed("Thought: ok\nObser") == "Thought: ok\n"  # "Obser" 扣住
    assert checker.matched is None and checker.buffer == "Obser"
    assert checker.feed("vation: 42") == ""
    assert checker.matched == "Observation:"
    assert checker.feed("more") == ""  # 命中之后不再吐文本
    # 扣住的尾巴最后没有变成停止串：照常发出
    checker = StopChecker(["Observation:"])
    assert checker.feed("an Obs") == "an "
    assert checker.feed("cure") == "Obscure"
    assert checker.feed("x Ob") == "x "
    assert checker.flush() == "Ob"


def test_stop_first_completed_wins() -> None:
    assert feed_all(["abcd", "bc"], ["abcd"]) == ("a", "bc")
    assert feed_all(["bc", "abc"], ["xabc"]) == ("x", "abc")  # 同时结束：开始得早的
    assert feed_all(["\n\n"], ["line\n", "\n", "next"]) == ("line", "\n\n")
    with pytest.raises(ValueError, match="must not be empty"):
        feed_all(["ok", ""], ["x"])


@pytest.mark.parametrize("seed", range(8))
def test_stop_does_not_depend_on_how_text_is_split(seed: int) -> None:
    """随机文本、随机停止串、随机切段：结果总等于一次性处理全文的参照。"""
    rng = random.Random(seed)
    for _ in range(300):
        text = "".join(rng.choice("ab\n") for _ in range(rng.randint(0, 24)))
        stops = ["".join(rng.choice("ab\n") for _ in range(rng.randint(1, 4))) for _ in range(3)]
        cuts = sorted(rng.sample(range(len(text) + 1), k=min(len(text) + 1, rng.randint(0, 6))))
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
        assert feed_all(stops, pieces) == reference_stop(stops, text), (text, stops, pieces)


# ---------------------------------------------------------------- 带 seed 的采样


def test_seeded_rows_do_not_depend_on_the_batch() -> None:
    """同一行（同样的 logits、seed、位置）放进不同的批次、不同的行，抽到的 token 相同；
    不带 seed 的行照常用共享的生成器。"""
    from minisgl.core import SamplingParams
    from minisgl.engine.sample import BatchSamplingArgs, Sampler

    torch.manual_seed(0)
    vocab = 50
    row = torch.randn(vocab)
    seeded = SamplingParams(temperature=1.0, seed=123)
    picks = []
    for size in (1, 3, 7):
        others = torch.randn(size - 1, vocab)
        where = size // 2
        logits = torch.cat([others[:where], row[None], others[where:]])
        params = [SamplingParams(temperature=1.0)] * (size - 1)
        params.insert(where, seeded)
        args = BatchSamplingArgs.from_params(params, vocab, "cpu", positions=[17] * size)
        picks.append(int(Sampler("cpu", seed=size).sample(logits, args)[where]))
    assert len(set(picks)) == 1
    with pytest.raises(ValueError, match="positions"):
        BatchSamplingArgs.from_params([seeded], vocab, "cpu")


def test_seeded_sampling_follows_the_distribution() -> None:
    """逆变换抽样的频率和 softmax 概率一致（3000 个不同的 (seed, 位置)），且尊重 top-k。"""
    from minisgl.core import SamplingParams
    from minisgl.engine.sample import BatchSamplingArgs, Sampler

    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0, -30.0]])
    probs = logits.softmax(-1)[0]
    sampler = Sampler("cpu")
    counts = torch.zeros(5)
    n = 3000
    for i in range(n):
        params = [SamplingParams(temperature=1.0, seed=i % 50)]
        args = BatchSamplingArgs.from_params(params, 5, "cpu", positions=[i // 50])
        counts[int(sampler.sample(logits, args)[0])] += 1
    freq = counts / n
    assert torch.allclose(freq, probs, atol=0.03), (freq, probs)
    for i in range(200):
        params = [SamplingParams(temperature=1.0, top_k=2, seed=i)]
        args = BatchSamplingArgs.from_params(params, 5, "cpu", positions=[0])
        assert int(sampler.sample(logits, args)[0]) in (0, 1)


# ---------------------------------------------------------------- 消息、调度器、指标


def test_new_fields_travel_through_messages_and_tokenizer(tiny_model: Path) -> None:
    import msgpack

    from minisgl.message import (
        BaseFrontendMsg,
        BaseTokenizerMsg,
        DetokenizeMsg,
        ReplyStatus,
        UserReply,
    )
    from minisgl.tokenizer import TokenizerWorker
    from minisgl.utils import load_tokenizer

    status = ReplyStatus("length", None, prompt_tokens=5, completion_tokens=3)
    msg = DetokenizeMsg(7, 42, True, status)
    raw = msgpack.packb(msg.encoder())
    assert BaseTokenizerMsg.decoder(msgpack.unpackb(raw)) == msg
    worker = TokenizerWorker(load_tokenizer(tiny_model), eos_token_ids=[])
    _, replies = worker.handle([msg])
    assert isinstance(replies[0], UserReply)
    assert replies[0].status == status  # 同一份记录原样转发，没有逐个字段地抄
    back = BaseFrontendMsg.decoder(msgpack.unpackb(msgpack.packb(replies[0].encoder())))
    assert back == replies[0] and isinstance(back.status, ReplyStatus)


def test_scheduler_reports_token_counts(tiny_model: Path, make_llm: Any) -> None:
    from minisgl.core import SamplingParams
    from minisgl.scheduler import PendingReq

    llm = make_llm(tiny_model)
    scheduler = llm.scheduler
    ids = torch.tensor([1, 2, 3, 4, 5], dtype=torch.int32)
    params = SamplingParams(max_tokens=4, ignore_eos=True)
    assert scheduler.add_request(PendingReq(0, ids, params)) is None
    outputs = []
    while scheduler.has_work:
        outputs += scheduler.step()
    assert [o.completion_tokens for o in outputs] == [1, 2, 3, 4]
    assert {o.prompt_tokens for o in outputs} == {5}
    assert outputs[-1].finish_reason == "length"
    rejected = scheduler.add_request(PendingReq(1, torch.tensor([], dtype=torch.int32)))
    assert rejected is not None and rejected.finish_reason == "error" and rejected.error


def test_server_modules_import_one_way() -> None:
    """server/ 的模块之间的 import 没有环：路由（api_server）在最上面，格式、生成过程、前端、
    指标各在下面，谁也不回头导入上层。只看模块顶层的 import（函数里的延迟导入不算）。"""
    import ast

    import minisgl.server as server

    root = Path(server.__file__).parent
    graph: dict[str, set[str]] = {}
    for path in sorted(root.glob("*.py")):
        deps = set()
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
                deps.add(node.module.split(".")[0])
        graph[path.stem] = deps
    assert {"protocol", "completions", "frontend"} <= graph["api_server"]

    def reaches(start: str, target: str, seen: set[str]) -> bool:
        for dep in graph.get(start, set()) - seen:
            if dep == target or reaches(dep, target, seen | {dep}):
                return True
        return False

    circles = sorted(name for name in graph if reaches(name, name, set()))
    assert not circles, f"这些模块处在 import 环里：{circles}"


def test_prometheus_text_format() -> None:
    from minisgl.message import SchedulerStats
    from minisgl.server.metrics import Histogram, Metrics

    h = Histogram(buckets=(0.1, 1.0))
    for v in (0.05, 0.1, 0.5, 3.0):
        h.observe(v)
    assert h.lines("x") == [
        'x_bucket{le="0.1"} 2',  # le 是"小于等于"：0.1 落在第一格
        'x_bucket{le="1"} 3',
        'x_bucket{le="+Inf"} 4',
        "x_sum 3.650000",
        "x_count 4",
    ]
    with pytest.raises(ValueError):
        Histogram(buckets=(1.0, 0.5))
    m = Metrics()
    assert "running_requests" not in m.render()  # 调度器还没报账：不编造
    m.scheduler = SchedulerStats(1, 2, 64, 10, 4, 7, 8)
    m.record_finish("stop", 5, 7, 0.2)
    m.record_finish("length", 3, 4, 0.3)
    text = m.render()
    assert text.endswith("\n")
    samples = [ln for ln in text.splitlines() if not ln.startswith("#")]
    for line in samples:  # 每个样本：名字（可带标签）+ 空格 + 数
        name, value = line.rsplit(" ", 1)
        float(value)
        assert name.startswith("minisgl_")
    assert "minisgl_waiting_requests 2" in samples
    assert "minisgl_kv_pages_used 50" in samples  # 64 - 10 空闲 - 4 可淘汰
    assert "minisgl_prompt_tokens_total 8" in samples
    assert 'minisgl_requests_finished_total{reason="length"} 1' in samples
    helps = [ln.split()[2] for ln in text.splitlines() if ln.startswith("# TYPE")]
    assert len(helps) == len(set(helps))  # 每个指标只声明一次


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"prompt": "hi", "stop": ["ok", ""]}, "stop strings must not be empty"),
        ({"prompt": "hi", "stop": [str(i) for i in range(17)]}, "at most 16"),
        ({"prompt": "hi", "stream_options": {"include_usage": True}}, "only allowed"),
        ({"prompt": "hi", "logprobs": True}, "'logprobs' is not supported"),
        ({"prompt": "hi", "seed": "7"}, "seed"),
        ({"prompt": "hi", "seed": 1 << 64}, "seed"),  # msgpack 装不下的整数
        ({"prompt": "hi", "top_k": 10**30}, "top_k"),
        ({"prompt": "hi", "n": 3}, "only n=1"),
    ],
)
def test_request_validation(body: dict[str, Any], param: str) -> None:
    from pydantic import ValidationError

    from minisgl.server.protocol import ChatCompletionRequest, CompletionRequest

    for cls in (ChatCompletionRequest, CompletionRequest):
        with pytest.raises(ValidationError, match=param):
            cls.model_validate(body)
    ok = CompletionRequest.model_validate({"prompt": "hi", "logprobs": None, "user": "x"})
    assert ok.stop_strings == [] and ok.token_limit == 16  # 补全接口的默认值，和 OpenAI 相同
    assert CompletionRequest.model_validate({"prompt": "hi", "max_tokens": None}).token_limit == 16
    chat = ChatCompletionRequest.model_validate({"prompt": "hi"})
    assert chat.token_limit is None  # 对话接口：生成到上下文用完
    assert chat.sampling_params().max_tokens > MAX_SEQ_LEN
    with pytest.raises(ValidationError, match="messages"):
        CompletionRequest.model_validate({"prompt": "hi", "messages": [{"role": "user"}]})


def test_stats_are_reported_when_work_starts_and_ends(monkeypatch: pytest.MonkeyPatch) -> None:
    """调度器报账：忙着的时候限频，刚忙起来、刚闲下来都不限频（``force``）。一批请求在一个
    限频间隔里就跑完时，``/metrics`` 上也不会只剩开始之前那份"空闲"。"""
    from minisgl.scheduler import Scheduler
    from minisgl.server.launch import ServingScheduler

    work = [False, True, True, True, False, False]  # 每一步之后有没有活
    forced: list[bool] = []

    class Recorder:
        def publish(self, scheduler: Any, force: bool = False) -> None:
            forced.append(force)

    monkeypatch.setattr(Scheduler, "step", lambda self: [])
    monkeypatch.setattr(ServingScheduler, "has_work", property(lambda self: work[len(forced)]))
    monkeypatch.setattr(ServingScheduler, "report_kv", lambda self, when: None)
    scheduler = object.__new__(ServingScheduler)
    scheduler.publisher = Recorder()  # type: ignore[assignment]
    for _ in work:
        scheduler.step()
    assert forced == [True, True, False, False, True, True]


# ---------------------------------------------------------------- 真的服务


@pytest.fixture(scope="module")
def server(server_kit: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    log = tmp_path_factory.mktemp("ch16") / "server.log"
    srv = server_kit.start(
        log,
        "--num-pages",
        str(NUM_PAGES),
        "--max-seq-len-override",
        str(MAX_SEQ_LEN),
        "--max-running-reqs",
        str(MAX_RUNNING),
    )
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def hf_greedy(tiny_model: Path) -> Any:
    """transformers 的贪心生成：返回 (文本, 生成的 token 数（含停止符）, 是否因停止符结束)。"""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from minisgl.utils import read_eos_token_ids

    tok = AutoTokenizer.from_pretrained(tiny_model)
    hf = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32).eval()
    eos = set(read_eos_token_ids(str(tiny_model)))

    @torch.no_grad()
    def generate(prompt: str, max_tokens: int) -> tuple[str, int, bool]:
        seq, out = torch.tensor([tok(prompt)["input_ids"]]), []
        for _ in range(max_tokens):
            nxt = int(hf(seq).logits[0, -1].argmax())
            if nxt in eos:
                text = tok.decode(out, skip_special_tokens=True, clean_up_tokenization_spaces=False)
                return text, len(out) + 1, True
            out.append(nxt)
            seq = torch.cat([seq, torch.tensor([[nxt]])], dim=1)
        text = tok.decode(out, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        return text, len(out), False

    return generate


def sse(resp: httpx.Response) -> list[Any]:
    events = [ln[6:] for ln in resp.iter_lines() if ln.startswith("data: ")]
    assert events[-1] == "[DONE]"
    return [json.loads(e) for e in events[:-1]]


def test_usage_and_finish_reason_match_transformers(server: Any, hf_greedy: Any) -> None:
    for prompt in (PROMPT, "1, 2, 3,", "你好"):
        text, tokens, hit_eos = hf_greedy(prompt, 24)
        body = server.post("/v1/completions", prompt=prompt, max_tokens=24, temperature=0).json()
        choice = body["choices"][0]
        assert choice["text"] == text
        assert choice["finish_reason"] == ("stop" if hit_eos else "length")
        usage = body["usage"]
        assert usage["completion_tokens"] == tokens
        assert usage["total_tokens"] == usage["prompt_tokens"] + tokens
        assert body["object"] == "text_completion" and body["id"].startswith("cmpl-")


def test_stream_equals_non_stream_with_usage(server: Any) -> None:
    for path, kind in (("/v1/completions", "text"), ("/v1/chat/completions", "chat")):
        body: dict[str, Any] = {"max_tokens": 20, "temperature": 0, "ignore_eos": True}
        if kind == "chat":
            body["messages"] = [{"role": "user", "content": "用一句话介绍北京。"}]
        else:
            body["prompt"] = PROMPT
        whole = server.post(path, **body).json()
        with httpx.stream(
            "POST",
            server.url(path),
            json={**body, "stream": True, "stream_options": {"include_usage": True}},
            timeout=120,
        ) as r:
            assert r.status_code == 200
            chunks = sse(r)
        *content, last, usage_chunk = chunks
        assert usage_chunk["choices"] == [] and usage_chunk["usage"] == whole["usage"]
        assert all(c["usage"] is None for c in chunks[:-1])
        assert last["choices"][0]["finish_reason"] == "length"
        assert whole["usage"]["completion_tokens"] == 20
        if kind == "chat":
            assert content[0]["choices"][0]["delta"]["role"] == "assistant"
            streamed = "".join(c["choices"][0]["delta"].get("content", "") for c in content)
            assert streamed == whole["choices"][0]["message"]["content"]
        else:
            streamed = "".join(c["choices"][0]["text"] for c in content)
            assert streamed == whole["choices"][0]["text"]
        # 不要 include_usage：没有 usage 字段，也没有那个空的片段
        with httpx.stream("POST", server.url(path), json={**body, "stream": True}) as r:
            plain = sse(r)
        assert "usage" not in plain[-1] and plain[-1]["choices"]


def test_stop_strings_cut_and_abort(server: Any) -> None:
    """停止串取自完整回答的中间（跨 token）：输出截在它之前、一个字也不漏，结束原因是 stop，
    用量比完整的少；流式的每个片段里也看不到它。从来不出现的停止串不影响结果。"""
    base = {"prompt": PROMPT, "max_tokens": 40, "temperature": 0, "ignore_eos": True}
    full = server.post("/v1/completions", **base).json()["choices"][0]["text"]
    assert len(full) > 12
    stop = full[6:11]
    cut = full[: full.find(stop)]
    body = server.post("/v1/completions", **base, stop=[stop, "never-appears"]).json()
    choice = body["choices"][0]
    assert (choice["text"], choice["finish_reason"], choice["matched_stop"]) == (cut, "stop", stop)
    assert body["usage"]["completion_tokens"] < 40
    with httpx.stream(
        "POST", server.url("/v1/completions"), json={**base, "stop": stop, "stream": True}
    ) as r:
        chunks = sse(r)
    texts = [c["choices"][0]["text"] for c in chunks]
    assert "".join(texts) == cut and all(stop not in t for t in texts)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    same = server.post("/v1/completions", **base, stop="never-appears").json()["choices"][0]
    assert same["text"] == full and same["finish_reason"] == "length"


def test_seed_reproducible_under_concurrency(server: Any) -> None:
    from concurrent.futures import ThreadPoolExecutor

    body = {"prompt": PROMPT, "max_tokens": 16, "temperature": 1.0, "ignore_eos": True}

    def ask(seed: int | None) -> str:
        extra = {} if seed is None else {"seed": seed}
        return server.post("/v1/completions", **body, **extra).json()["choices"][0]["text"]

    alone = ask(7)
    with ThreadPoolExecutor(8) as pool:  # 和不带 seed 的请求拼在同一批里
        mixed = list(pool.map(ask, [7, None, 7, None, 8, 7, None, 8]))
    assert [mixed[i] for i in (0, 2, 5)] == [alone] * 3
    assert mixed[4] == mixed[7] != alone


@pytest.mark.parametrize(
    ("path", "body", "status", "needle"),
    [
        ("/v1/completions", {"prompt": "hi", "max_tokens": -5}, 400, "max_tokens"),
        ("/v1/completions", {"prompt": "hi", "max_tokens": 10**9}, 400, "context length"),
        ("/v1/completions", {"prompt": "hi", "max_completion_tokens": 4096}, 400, "context"),
        ("/v1/completions", {"prompt": "hi", "temperature": -0.1}, 400, "temperature"),
        ("/v1/completions", {"prompt": "hi", "top_p": 1.5}, 400, "top_p"),
        ("/v1/completions", {"prompt": ["a", "b"]}, 400, "prompt"),
        ("/v1/completions", {"prompt": "hi", "n": 2}, 400, "only n=1"),
        ("/v1/completions", {"prompt": "hi", "echo": True}, 400, "'echo' is not supported"),
        ("/v1/completions", {"messages": [{"role": "user", "content": "x"}]}, 400, "prompt"),
        ("/v1/chat/completions", {"messages": [{"role": "bot", "content": "x"}]}, 400, "role"),
        ("/v1/chat/completions", {"messages": "hello"}, 400, "messages"),
        ("/v1/chat/completions", {"prompt": "x", "stop": [""]}, 400, "must not be empty"),
    ],
)
def test_bad_requests(server: Any, path: str, body: Any, status: int, needle: str) -> None:
    resp = server.post(path, **body)
    assert resp.status_code == status, resp.text
    error = resp.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert needle in error["message"] or needle == error["param"], error


def test_too_long_prompt_and_too_large_body(server: Any) -> None:
    """提示比上下文长：400，消息说明长度（第 15 章是一个空的 200）；请求体超过 8 MiB：413，
    不管有没有 Content-Length；服务照常工作。"""
    resp = server.post("/v1/completions", prompt="hello " * (MAX_SEQ_LEN + 10), max_tokens=4)
    assert resp.status_code == 400 and "maximum context length" in resp.json()["error"]["message"]
    with httpx.stream("POST", server.url("/v1/chat/completions"), json={}) as r:
        assert r.status_code == 400  # 流式接口也一样：错误在开始流式输出之前
    huge = json.dumps({"prompt": "x" * (9 << 20)}).encode()
    resp = httpx.post(server.url("/v1/completions"), content=huge, timeout=120)
    assert resp.status_code == 413 and "larger than" in resp.json()["error"]["message"]

    def chunked() -> Iterator[bytes]:  # 没有 Content-Length：边读边数
        for _ in range(10):
            yield b" " * (1 << 20)

    resp = httpx.post(server.url("/v1/completions"), content=chunked(), timeout=120)
    assert resp.status_code == 413
    assert server.post("/v1/completions", prompt="hi", max_tokens=2).status_code == 200


def test_openai_client_completions_and_usage(server: Any) -> None:
    import openai

    client = openai.OpenAI(base_url=server.url("/v1"), api_key="none", max_retries=0)
    r = client.completions.create(
        model="tiny", prompt=PROMPT, max_tokens=8, temperature=0, extra_body={"ignore_eos": True}
    )
    assert r.usage is not None and r.usage.completion_tokens == 8
    assert r.choices[0].finish_reason == "length" and r.choices[0].text
    # 没给 max_tokens：补全接口按 OpenAI 的约定只生成 16 个
    r = client.completions.create(
        model="tiny", prompt=PROMPT, temperature=0, extra_body={"ignore_eos": True}
    )
    assert r.usage is not None and r.usage.completion_tokens == 16
    assert r.choices[0].finish_reason == "length"
    stream = client.chat.completions.create(
        model="tiny",
        messages=[{"role": "user", "content": "hi"}],
        max_completion_tokens=6,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )
    chunks = list(stream)
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 6
    assert chunks[-2].choices[0].finish_reason == "length"
    with pytest.raises(openai.BadRequestError, match="context length"):
        client.completions.create(model="tiny", prompt="x", max_tokens=100000)


def test_metrics_count_and_return_to_idle(server: Any, wait_until: Any) -> None:
    before = server.metrics()
    body = server.post("/v1/completions", prompt=PROMPT, max_tokens=5, ignore_eos=True).json()
    usage = body["usage"]

    def settled() -> bool:
        m = server.metrics()
        return m["minisgl_kv_pages_free"] + m["minisgl_kv_pages_cached"] == NUM_PAGES and (
            m["minisgl_generation_tokens_total"] >= before["minisgl_generation_tokens_total"] + 5
        )

    wait_until(settled, 30, "the scheduler to report an idle KV pool")
    after = server.metrics()
    grew = after["minisgl_prompt_tokens_total"] - before["minisgl_prompt_tokens_total"]
    assert grew == usage["prompt_tokens"]
    assert (
        after["minisgl_generation_tokens_total"] - before["minisgl_generation_tokens_total"]
        == usage["completion_tokens"]
        == 5
    )
    assert after["minisgl_running_requests"] == after["minisgl_waiting_requests"] == 0
    assert after["minisgl_kv_pages_used"] == 0
    assert after["minisgl_request_rows_free"] == MAX_RUNNING
    assert after["minisgl_kv_pages_capacity"] == NUM_PAGES
    assert after["minisgl_http_requests_in_flight"] == 0
    assert after["minisgl_request_latency_seconds_count"] > before.get(
        "minisgl_request_latency_seconds_count", 0
    )
