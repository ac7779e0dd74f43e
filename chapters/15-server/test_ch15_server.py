"""第 15 章：真的起服务（真的进程、真的 ZMQ socket、uvicorn 监听 127.0.0.1 的空闲端口）。

- 非流式的输出和 Hugging Face transformers 的贪心结果逐字相同；流式拼起来和非流式相同；
  8 个并发请求各自的结果和单独发时相同；
- 客户端中途断开：服务端中止请求，KV 页和请求表的行全部还回来（读调度器的日志行，见下）；
- 官方的 ``openai`` 客户端，流式、非流式、报错；
- 坏请求得到 400 和 OpenAI 格式的错误；过长的提示立刻返回，不会挂住；
- tp=2（两个 CPU 进程，gloo）端到端；
- Ctrl-C（SIGINT 发给整个进程组）和 SIGTERM（只发给主进程）之后，不留进程、不留 socket 文件；
  子进程在就绪之前就退出时，启动器报错退出，而不是一直等下去；
- 交互式 shell：一个用户、多轮、/reset。

每个服务都在自己的进程组里启动，测试结束时（包括失败时）整组杀掉；所有等待都有时限。
"""

from __future__ import annotations

import glob
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
import torch

START_TIMEOUT = 300.0  # 加载模型、起进程；机器很忙时也够
HTTP_TIMEOUT = 120.0
NUM_PAGES, MAX_SEQ_LEN, MAX_RUNNING = 512, 512, 16
# 本章的服务总是报 "stop"；第 16 章起按真实原因报告，生成满 max_tokens 时是 "length"
FINISHED = ("stop", "length")
CHAT = [{"role": "user", "content": "用一句话介绍北京。"}]


# ---------------------------------------------------------------- 起服务、关服务


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def chat(self, **body: Any) -> httpx.Response:
        body.setdefault("model", "tiny")
        return httpx.post(self.url("/v1/chat/completions"), json=body, timeout=HTTP_TIMEOUT)


def start_server(model: Path, log: Path, *extra: str) -> Server:
    """``python -m minisgl``，端口 0（由内核挑，从日志里读出实际的端口），等到它就绪。"""
    cmd = [sys.executable, "-m", "minisgl", "--model", str(model), "--port", "0"]
    cmd += ["--dtype", "float32", "--num-pages", str(NUM_PAGES)]
    cmd += ["--max-seq-len-override", str(MAX_SEQ_LEN), "--max-running-reqs", str(MAX_RUNNING)]
    env = dict(os.environ, PYTHONUNBUFFERED="1")  # 日志马上写进文件，测试要读
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [*cmd, *extra], stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    deadline = time.monotonic() + START_TIMEOUT
    try:
        while True:
            text = log.read_text(encoding="utf-8", errors="replace")
            m = re.search(r"API server is ready on http://127\.0\.0\.1:(\d+)", text)
            if m:
                server = Server(proc, int(m.group(1)), log)
                assert httpx.get(server.url("/v1/models"), timeout=HTTP_TIMEOUT).status_code == 200
                return server
            if proc.poll() is not None:
                raise RuntimeError(f"server exited with {proc.returncode}:\n{text[-4000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"server not ready after {START_TIMEOUT} s:\n{text[-4000:]}")
            time.sleep(0.2)
    except BaseException:
        kill_group(proc)
        raise


def kill_group(proc: subprocess.Popen[Any]) -> None:
    """最后的保险：整个进程组 SIGKILL。"""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def alive(pid: int) -> bool:
    try:  # 孤儿进程退出后可能成为没人回收的僵尸：它已经不在运行了
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


def ipc_files(server_pid: int) -> list[str]:
    return glob.glob(f"/tmp/minisgl_*.pid={server_pid}")


def titles(server_pid: int) -> tuple[str, list[str]]:
    """主进程和各个子进程在 ps 里的名字（setproctitle 改写的是命令行，第一项就是名字）。
    multiprocessing 的 resource_tracker 不是启动器起的，没有改名，不算在内。"""

    def title(p: psutil.Process) -> str:
        cmdline = p.cmdline()
        return cmdline[0] if cmdline else ""

    main = psutil.Process(server_pid)
    kids = [title(k) for k in main.children(recursive=True)]
    return title(main), sorted(t for t in kids if t.startswith("minisgl::"))


@pytest.fixture(scope="module")
def server(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """本文件大多数测试共用的服务：tp=1，一个 tokenizer 进程。"""
    log = tmp_path_factory.mktemp("ch15") / "server.log"
    srv = start_server(tiny_model, log)
    try:
        yield srv
    finally:
        srv.proc.send_signal(signal.SIGTERM)
        try:
            srv.proc.wait(timeout=60)
        finally:
            kill_group(srv.proc)


# ---------------------------------------------------------------- 参照答案


@pytest.fixture(scope="module")
def hf_reference(tiny_model: Path) -> Any:
    """transformers 的贪心生成，按服务端的约定解码（去掉结尾的停止符，跳过特殊 token）。"""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from minisgl.utils import read_eos_token_ids

    tok = AutoTokenizer.from_pretrained(tiny_model)
    hf = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32).eval()
    eos = set(read_eos_token_ids(str(tiny_model)))

    @torch.no_grad()
    def generate(text: str | list[dict[str, str]], max_tokens: int) -> str:
        if isinstance(text, str):
            ids = tok(text)["input_ids"]
        else:
            prompt = tok.apply_chat_template(text, tokenize=False, add_generation_prompt=True)
            ids = tok(prompt, add_special_tokens=False)["input_ids"]
        seq, out = torch.tensor([ids]), []
        for _ in range(max_tokens):  # 每一步把整段序列送进去：最直接、不会错的参照
            nxt = int(hf(seq).logits[0, -1].argmax())
            if nxt in eos:
                break
            out.append(nxt)
            seq = torch.cat([seq, torch.tensor([[nxt]])], dim=1)
        return tok.decode(out, skip_special_tokens=True, clean_up_tokenization_spaces=False)

    return generate


def sse_events(resp: httpx.Response) -> list[str]:
    """SSE 的 ``data:`` 行（去掉前缀），按到达顺序。"""
    return [line[len("data: ") :] for line in resp.iter_lines() if line.startswith("data: ")]


# ---------------------------------------------------------------- 生成的结果


def test_non_stream_matches_hf_greedy(server: Server, hf_reference: Any) -> None:
    """非流式（stream=false，返回 JSON）：对话和纯文本两种输入，都和 transformers 逐字相同。"""
    resp = server.chat(messages=CHAT, max_tokens=16, temperature=0)
    assert resp.status_code == 200
    assert resp.headers["content-type"].startswith("application/json")
    body = resp.json()
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"]["role"] == "assistant"
    assert body["choices"][0]["message"]["content"] == hf_reference(CHAT, 16)
    assert body["choices"][0]["finish_reason"] in FINISHED

    prompt = "The capital of France is"
    resp = server.chat(prompt=prompt, max_tokens=12, temperature=0)
    assert resp.json()["choices"][0]["message"]["content"] == hf_reference(prompt, 12)


def test_streaming_and_concurrency(server: Server) -> None:
    """流式：第一个片段带 role，最后一个带 finish_reason，然后是 [DONE]；拼起来等于非流式。
    8 个并发请求被合成批次一起算，每个的结果和单独发时相同。"""
    body = {"model": "tiny", "messages": CHAT, "max_tokens": 16, "temperature": 0}
    with httpx.stream(
        "POST", server.url("/v1/chat/completions"), json={**body, "stream": True}, timeout=60
    ) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        events = sse_events(r)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    reasons = [c["choices"][0]["finish_reason"] for c in chunks]
    assert reasons[:-1] == [None] * (len(chunks) - 1) and reasons[-1] in FINISHED
    streamed = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    whole = server.chat(**body).json()["choices"][0]["message"]["content"]
    assert streamed == whole and len(chunks) > 2

    def ask(i: int) -> str:
        resp = server.chat(
            messages=[{"role": "user", "content": f"{i}+{i}=?"}],
            max_tokens=12,
            temperature=0,
            ignore_eos=True,
        )
        return resp.json()["choices"][0]["message"]["content"]

    alone = [ask(i) for i in range(8)]
    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(ask, range(8)))
    assert together == alone

    # /generate：最简单的流式接口，每条事件是一段增量文本（JSON 字符串）
    gen = {"prompt": "The capital of France is", "max_tokens": 12}
    with httpx.stream("POST", server.url("/generate"), json=gen, timeout=60) as r:
        events = sse_events(r)
    assert events[-1] == "[DONE]"
    text = "".join(json.loads(e) for e in events[:-1])
    prompt_body = {**body, "prompt": gen["prompt"], "max_tokens": 12}
    del prompt_body["messages"]
    assert text == server.chat(**prompt_body).json()["choices"][0]["message"]["content"]


KV_LINE = re.compile(
    r"(ready|idle): KV pages available (\d+)/(\d+) \((\d+) free\), free rows (\d+)/(\d+)"
)


def test_client_disconnect_aborts_request(server: Server) -> None:
    """客户端中途断开：服务端中止请求，它占的 KV 页和请求表的行全部还回来，之后的请求照常工作。

    怎么看到"还回来了"：调度器每次从有活变成没活时打一行日志，报告可用的 KV 页
    （空闲的 + 前缀缓存里可以淘汰的）和空闲的行。中止之后的那一行必须回到启动时的数字——
    被中止的请求如果漏了释放，它的页既不空闲、也被锁着不能淘汰，这个数就少了。
    """
    ready = [m for m in KV_LINE.finditer(server.log_text()) if m.group(1) == "ready"]
    assert ready, "the scheduler should report the KV pool when it is ready"
    total = (int(ready[0].group(2)), int(ready[0].group(5)))
    assert total == (NUM_PAGES, MAX_RUNNING)

    # 流式：读了几段就断开
    body = {"model": "tiny", "prompt": "Tell me a long story.", "max_tokens": 480}
    body.update(stream=True, ignore_eos=True)  # 不断开的话要生成很久
    with httpx.stream("POST", server.url("/v1/chat/completions"), json=body, timeout=60) as r:
        first = None
        for i, event in enumerate(sse_events_lazy(r)):
            first = first or json.loads(event)
            if i >= 3:
                break
    uid = int(first["id"].removeprefix("chatcmpl-"))
    assert kv_after_abort(server, uid) == total

    # 非流式：客户端等不及（读超时）就走了，服务端照样发现并中止。先用 48 个 token 的同样请求
    # 量一下这台机器有多快，按它估出生成 480 个要多久，客户端只等四分之一：CPU 上要好几秒，
    # 一定等不及。快的 GPU 上不到 1.2 秒——客户端走的时候离生成完只差零点几秒，API Server
    # 每 0.2 秒才看一次连接，来不及发现也不算错，只检查页都还回来了
    def idle_since(mark: int) -> bool:  # 日志第 mark 个字符之后，调度器空闲、页全部还回来了
        idle = [m for m in KV_LINE.finditer(server.log_text(), mark) if m.group(1) == "idle"]
        return any((int(m.group(2)), int(m.group(5))) == total for m in idle)

    url, non_stream = server.url("/v1/chat/completions"), {**body, "stream": False}
    mark, start = len(server.log_text()), time.monotonic()
    assert server.chat(**{**non_stream, "max_tokens": 48}).status_code == 200
    took = (time.monotonic() - start) * body["max_tokens"] / 48
    wait_for(lambda: idle_since(mark), 60, "the scheduler to go idle")
    before = len(re.findall(r"Aborting request (\d+)", server.log_text()))
    mark = len(server.log_text())  # 下面只看这个请求发出之后的日志
    try:
        httpx.post(url, json=non_stream, timeout=took / 4)
        left_early = False
    except httpx.ReadTimeout:
        left_early = True
    left = time.monotonic()
    if not left_early or took < 1.2:
        wait_for(lambda: idle_since(mark), 60, "the KV pool to be back to idle")
        assert server.chat(prompt="1 + 1 =", max_tokens=4).status_code == 200
        return

    def noticed() -> bool:
        return len(re.findall(r"Aborting request (\d+)", server.log_text())) > before

    wait_for(lambda: noticed() or idle_since(mark), 60, "the API server to notice the disconnect")
    if not noticed():  # 估计偏慢（机器忙时量的那一次慢了）：客户端刚走就生成完了，没赶上看连接
        assert time.monotonic() - left < 1.0, "the request ran on long after the client left"
        assert server.chat(prompt="1 + 1 =", max_tokens=4).status_code == 200
        return
    uid = int(re.findall(r"Aborting request (\d+)", server.log_text())[before])
    assert kv_after_abort(server, uid) == total

    resp = server.chat(prompt="1 + 1 =", max_tokens=4)
    assert resp.status_code == 200 and resp.json()["choices"][0]["message"]["content"]


def kv_after_abort(server: Server, uid: int) -> tuple[int, int]:
    """等调度器中止 ``uid``（请求还活着时才有这一行），返回随后空闲时的（可用页，空闲行）。"""
    mark = f"aborted request {uid}\n"

    def aborted_and_idle() -> bool:
        text = server.log_text()
        at = text.find(mark)
        return at >= 0 and any(m.group(1) == "idle" for m in KV_LINE.finditer(text, at))

    wait_for(aborted_and_idle, 60, f"the scheduler to abort request {uid} and go idle")
    text = server.log_text()
    assert f"Aborting request {uid}\n" in text  # API Server 发现了断开，发出了中止
    idle = next(m for m in KV_LINE.finditer(text, text.find(mark)) if m.group(1) == "idle")
    return int(idle.group(2)), int(idle.group(5))


def kv_by_rank(text: str, when: str) -> dict[int, tuple[int, int]]:
    """每个 rank 最近一次 ``when`` 时的（可用页，空闲行）；tp=1 时日志行不带 rank，记作 0。"""
    line = re.compile(r"(?:\|rank=(\d+))?\] INFO +" + KV_LINE.pattern)
    return {int(m[1] or 0): (int(m[3]), int(m[6])) for m in line.finditer(text) if m[2] == when}


def sse_events_lazy(resp: httpx.Response) -> Iterator[str]:
    for line in resp.iter_lines():
        if line.startswith("data: "):
            yield line[len("data: ") :]


def test_openai_client(server: Server) -> None:
    """官方的 openai 客户端：模型列表、非流式、流式（拼起来相同），400 变成 BadRequestError。"""
    import openai

    client = openai.OpenAI(base_url=server.url("/v1"), api_key="none", max_retries=0)
    assert [m.id for m in client.models.list().data] == [str(server_model(server))]
    r = client.chat.completions.create(model="tiny", messages=CHAT, max_tokens=10, temperature=0)
    text = r.choices[0].message.content
    assert text and r.choices[0].finish_reason in FINISHED
    stream = client.chat.completions.create(
        model="tiny", messages=CHAT, max_tokens=10, temperature=0, stream=True
    )
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == text
    assert chunks[-1].choices[0].finish_reason in FINISHED
    with pytest.raises(openai.BadRequestError, match="must not be empty"):
        client.chat.completions.create(model="tiny", messages=[], max_tokens=4)


def server_model(server: Server) -> str:
    return httpx.get(server.url("/v1/models"), timeout=HTTP_TIMEOUT).json()["data"][0]["id"]


# ---------------------------------------------------------------- 坏请求


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"model": "tiny"}, "either 'messages' or 'prompt'"),
        ({"model": "tiny", "messages": []}, "must not be empty"),
        ({"prompt": "a", "messages": [{"role": "user", "content": "b"}]}, "only one of"),
        ({"messages": [{"role": "robot", "content": "hi"}]}, "messages.0.role"),
        ({"messages": [{"role": "user"}]}, "messages.0.content"),
        ({"prompt": "hi", "max_tokens": 0}, "max_tokens"),
        ({"prompt": "hi", "max_tokens": True}, "max_tokens"),
        ({"prompt": "hi", "stream": "yes"}, "stream"),
        ({"prompt": "hi", "temperature": -1}, "temperature"),
        ({"prompt": "hi", "top_p": 0}, "top_p"),
        ({"prompt": "hi", "n": 2}, "only n=1"),
        pytest.param(  # 第 16 章支持了 stop
            {"prompt": "hi", "stop": ["\n"]},
            "'stop' is not supported",
            marks=pytest.mark.until_chapter(15),
        ),
        ({"prompt": ""}, "prompt"),
        ([1, 2, 3], "valid dictionary"),
    ],
)
def test_bad_request_gets_400_with_openai_error(server: Server, body: Any, needle: str) -> None:
    resp = httpx.post(server.url("/v1/chat/completions"), json=body, timeout=HTTP_TIMEOUT)
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert needle in error["message"] or needle == error["param"], error


def test_chat_messages_as_the_template_sees_them() -> None:
    """新版 OpenAI 客户端的两种写法：``content`` 写成几段 ``{"type": "text"}``，角色写成
    ``developer``（system 的新名字）。交给对话模板的是接起来的文本和 ``system``。"""
    from minisgl.server.api_server import ChatCompletionRequest

    parts = [{"type": "text", "text": "用一句话"}, {"type": "text", "text": "介绍北京。"}]
    body = {"messages": [{"role": "developer", "content": "简短回答。"},
                         {"role": "user", "content": parts}]}  # fmt: skip
    messages = ChatCompletionRequest.model_validate(body).messages
    assert [m.to_dict() for m in messages] == [
        {"role": "system", "content": "简短回答。"},
        {"role": "user", "content": "用一句话介绍北京。"},
    ]
    with pytest.raises(ValueError, match="lone surrogate"):  # pydantic 的 ValidationError
        ChatCompletionRequest.model_validate({"messages": [{"role": "user", "content": "x\udfff"}]})


def test_malformed_json_and_other_http_errors(server: Server) -> None:
    lone_surrogate = b'{"messages": [{"role": "user", "content": "x\\udfff"}]}'  # 编码不成 UTF-8
    for raw in (b'{"model": "tiny", "messages": [', b"not json at all", b"", lone_surrogate):
        resp = httpx.post(
            server.url("/v1/chat/completions"),
            content=raw,
            headers={"content-type": "application/json"},
            timeout=HTTP_TIMEOUT,
        )
        assert resp.status_code == 400, resp.text
        assert resp.json()["error"]["message"]
    resp = httpx.post(server.url("/generate"), json={"prompt": "hi"}, timeout=HTTP_TIMEOUT)
    assert resp.status_code == 400 and "max_tokens" in resp.json()["error"]["message"]
    resp = httpx.get(server.url("/v1/chat/completions"), timeout=HTTP_TIMEOUT)
    assert resp.status_code == 405 and "error" in resp.json()
    resp = httpx.get(server.url("/no/such/path"), timeout=HTTP_TIMEOUT)
    assert resp.status_code == 404 and "error" in resp.json()
    # 有的负载均衡器用 HEAD 探活：和 GET 一样的状态码，没有响应体
    resp = httpx.head(server.url("/health"), timeout=HTTP_TIMEOUT)
    assert resp.status_code == 200 and resp.content == b""
    # 这些都没有伤到服务
    assert server.chat(prompt="hi", max_tokens=2).status_code == 200


@pytest.mark.until_chapter(15)  # 第 16 章起是 400，见 test_ch16_openai.py
def test_over_long_prompt_returns_instead_of_hanging(server: Server) -> None:
    """提示比上下文还长：调度器拒绝它，回一个空的结束回复，客户端马上拿到结果（官方会一直挂着）。"""
    long_prompt = " ".join(["hello"] * (MAX_SEQ_LEN + 10))
    resp = server.chat(prompt=long_prompt, max_tokens=4)
    assert resp.status_code == 200
    assert resp.json()["choices"][0]["message"]["content"] == ""
    wait_for(lambda: "maximum context length" in server.log_text(), 30, "the rejection log line")
    assert server.chat(prompt="hi", max_tokens=2).status_code == 200


# ---------------------------------------------------------------- 多 rank、关闭、shell


def test_tp2_server_end_to_end(tiny_model: Path, tmp_path: Path, hf_reference: Any) -> None:
    """--tp 2：两个调度器进程（CPU 上走 gloo），结果和 transformers 相同；关闭后什么都不剩。"""
    # 两个 CPU rank（gloo）：GPU 机器上也在 CPU 上跑，一块 GPU 放不下两个 rank
    srv = start_server(tiny_model, tmp_path / "tp2.log", "--tp", "2", "--device", "cpu")
    try:
        kids = psutil.Process(srv.proc.pid).children(recursive=True)
        main, workers = titles(srv.proc.pid)  # 每个 rank 一个调度器 + 1 个 tokenizer
        assert main == "minisgl::api_server"
        assert workers == ["minisgl::detokenizer", "minisgl::scheduler_0", "minisgl::scheduler_1"]
        want = hf_reference(CHAT, 16)
        with ThreadPoolExecutor(4) as pool:  # 4 个同时到达：两个 rank 要对同一批请求做同样的决定
            resps = list(
                pool.map(lambda _: srv.chat(messages=CHAT, max_tokens=16, temperature=0), range(4))
            )
        assert [r.json()["choices"][0]["message"]["content"] for r in resps] == [want] * 4

        # 客户端中途断开：两个 rank 各自的 KV 池和请求表都要还回来
        ready = kv_by_rank(srv.log_text(), "ready")
        assert sorted(ready) == [0, 1] and ready[0] == ready[1] == (NUM_PAGES, MAX_RUNNING)
        before = len(srv.log_text())
        body = {"model": "tiny", "prompt": "Tell me a long story.", "max_tokens": 480}
        body.update(stream=True, ignore_eos=True)
        with httpx.stream("POST", srv.url("/v1/chat/completions"), json=body, timeout=60) as r:
            for i, _ in enumerate(sse_events_lazy(r)):
                if i >= 3:
                    break
        wait_for(
            lambda: len(kv_by_rank(srv.log_text()[before:], "idle")) == 2,
            60,
            "both ranks to report an idle KV pool",
        )
        assert "Aborting request" in srv.log_text()[before:]
        assert kv_by_rank(srv.log_text()[before:], "idle") == ready
        pids = [k.pid for k in kids]
        srv.proc.send_signal(signal.SIGTERM)
        assert srv.proc.wait(timeout=60) == 0
        wait_for(lambda: not any(alive(p) for p in pids), 30, "all processes to exit")
        assert ipc_files(srv.proc.pid) == []
    finally:
        kill_group(srv.proc)


@pytest.mark.parametrize("how", ["sigterm-main", "ctrl-c-group"])
def test_shutdown_leaves_no_process_and_no_socket_file(
    tiny_model: Path, tmp_path: Path, how: str
) -> None:
    """SIGTERM 只发给主进程（kill、systemd、docker stop），或者 Ctrl-C（SIGINT 发给整个前台
    进程组）：主进程退出码 0，所有子进程都退出，/tmp 里没有这个服务的 ipc socket 文件。"""
    srv = start_server(tiny_model, tmp_path / "server.log", "--num-tokenizer", "2")
    try:
        assert len(ipc_files(srv.proc.pid)) == 4  # 后端、反分词、前端、分词各一个
        # ps 里认得出每个进程（不再全是 python ... --multiprocessing-fork）
        assert titles(srv.proc.pid) == (
            "minisgl::api_server",
            [
                "minisgl::detokenizer",
                "minisgl::scheduler_0",
                "minisgl::tokenizer_0",
                "minisgl::tokenizer_1",
            ],
        )
        # 关闭时还有一个请求正在流式输出
        body = {"model": "tiny", "prompt": "go", "max_tokens": 400, "stream": True}
        got_first = threading.Event()

        def stream() -> None:
            try:
                url = srv.url("/v1/chat/completions")
                with httpx.stream("POST", url, json=body, timeout=60) as r:
                    for _ in r.iter_lines():
                        got_first.set()
            except httpx.HTTPError:
                pass

        reader = threading.Thread(target=stream, daemon=True)
        reader.start()
        assert got_first.wait(60)
        pids = [k.pid for k in psutil.Process(srv.proc.pid).children(recursive=True)]
        assert (
            len(pids) >= 4
        )  # 调度器、反分词、2 个分词（另有 multiprocessing 的 resource_tracker）
        if how == "sigterm-main":
            srv.proc.send_signal(signal.SIGTERM)
        else:
            os.killpg(srv.proc.pid, signal.SIGINT)
        assert srv.proc.wait(timeout=60) == 0
        wait_for(lambda: not any(alive(p) for p in pids), 30, "all processes to exit")
        assert ipc_files(srv.proc.pid) == []
        reader.join(timeout=30)
        assert "all processes exited" in srv.log_text()
    finally:
        kill_group(srv.proc)


def test_launcher_fails_fast_when_a_backend_process_dies(tmp_path: Path) -> None:
    """子进程在就绪之前就退出了（这里是模型文件夹是空的）：启动器报错退出，不会一直等下去。"""
    empty = tmp_path / "no-model"
    empty.mkdir()
    cmd = [sys.executable, "-m", "minisgl", "--model", str(empty), "--port", "0"]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        out, _ = proc.communicate(timeout=START_TIMEOUT)
    finally:
        kill_group(proc)
    text = out.decode("utf-8", errors="replace")
    assert proc.returncode != 0
    # 调度器和 tokenizer 都加载不了这个"模型"，谁先退出就报谁；最后一行带着它报上来的原因，
    # 主进程自己不再打一段 traceback
    last = text.strip().splitlines()[-1]
    pattern = r"exited before it was ready: minisgl-\S+ \(exit code 1\): "
    assert re.search(pattern, last), text[-3000:]
    assert str(empty) in last and last.startswith("the server did not start")
    assert ipc_files(proc.pid) == []


def test_shell_one_user_with_reset(tiny_model: Path, tmp_path: Path) -> None:
    """--shell：同一个问题问三次，中间 /reset 一次。第二次带着第一轮的历史，回答不同；
    /reset 之后历史清空，回答和第一次相同（贪心）。"""
    cmd = [sys.executable, "-m", "minisgl", "--model", str(tiny_model), "--shell"]
    cmd += ["--dtype", "float32", "--num-pages", str(NUM_PAGES)]
    cmd += ["--max-seq-len-override", str(MAX_SEQ_LEN)]
    env = dict(os.environ, PYTHONUNBUFFERED="1", MINISGL_SHELL_TEMPERATURE="0")
    env["MINISGL_SHELL_MAX_TOKENS"] = "10"
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    try:
        script = "你好\n你好\n/reset\n你好\n/oops\n/exit\n"
        out, _ = proc.communicate(script.encode(), timeout=START_TIMEOUT)
    finally:
        kill_group(proc)
    text = out.decode("utf-8", errors="replace")
    assert proc.returncode == 0, text
    from minisgl.shell import HELP

    session = text.split(HELP + "\n", 1)[1]
    turns = [t.rstrip("\n") for t in session.split("> ")]
    # 每一次读输入前打印一次 "> "：5 行输入、最后一个 "> " 之后是 /exit 和关闭的日志
    first, second, reset, third, unknown = turns[1:6]
    assert reset == "（对话历史已清空）"
    assert unknown.startswith("未知命令 /oops")
    assert first and first == third  # 同样的（空的）历史，同样的回答
    assert second != first  # 第二次带着第一轮的问答
    assert ipc_files(proc.pid) == []


# ---------------------------------------------------------------- 参数


def test_parse_args_reports_a_bad_dtype_like_argparse(capsys: pytest.CaptureFixture[str]) -> None:
    """不认识的 ``--dtype``：和别的坏参数一样，一行 ``error:``、退出码 2，没有 traceback。"""
    from minisgl.server import parse_args

    with pytest.raises(SystemExit) as exc:
        parse_args(["--model", "models/tiny-qwen3", "--dtype", "fp64"])
    assert exc.value.code == 2 and "error:" in capsys.readouterr().err


def test_parse_args_fills_addresses_and_shell_mode() -> None:
    from dataclasses import replace

    from minisgl.distributed import DistributedInfo
    from minisgl.server import parse_args

    args = parse_args(["--model", "models/tiny-qwen3", "--num-pages", "64", "--tp", "2"])
    addrs = [
        args.zmq_backend_addr,
        args.zmq_detokenizer_addr,
        args.zmq_broadcast_addr,
        args.zmq_frontend_addr,
    ]
    assert all(a is not None and a.startswith("ipc:///tmp/minisgl_") for a in addrs)
    assert len(set(addrs)) == 4
    assert args.zmq_tokenizer_addr == args.zmq_detokenizer_addr  # 默认共用一个 tokenizer 进程
    assert args.tokenizer_create_addr is True
    assert args.dist_init_addr is not None and args.dist_init_addr.startswith("tcp://127.0.0.1:")
    assert (args.num_pages, args.tp_info, args.dtype) == (64, DistributedInfo(0, 2), None)
    # 启动器给每个 rank 换 tp_info：地址不能变，否则各进程连不到一起
    rank1 = replace(args, tp_info=DistributedInfo(1, 2))
    assert (rank1.zmq_backend_addr, rank1.dist_init_addr) == (
        args.zmq_backend_addr,
        args.dist_init_addr,
    )

    many = parse_args(["--model", "m", "--num-tokenizer", "3", "--dtype", "bfloat16"])
    assert many.zmq_tokenizer_addr != many.zmq_detokenizer_addr
    assert many.tokenizer_create_addr is False  # API Server bind，3 个 tokenizer connect
    assert many.zmq_broadcast_addr is None and many.dtype == torch.bfloat16
    assert len(many.ipc_files) == 4

    shell = parse_args(["--model", "m", "--shell", "--max-running-reqs", "32"])
    assert shell.shell and shell.max_running_reqs == 1 and shell.silent_output
    assert shell.cuda_graph_batch_sizes == (1,)

    bad_args = (
        ["--port", "70000"],
        ["--num-tokenizer", "-1"],
        ["--max-seq-len-override", "0"],  # 不是"不限"：不给这个参数才是取模型的上限
        ["--max-seq-len-override", "-5"],
    )
    for bad in bad_args:
        with pytest.raises(SystemExit):  # argparse 式的报错（退出码 2），不是 traceback
            parse_args(["--model", "m", *bad])


def test_without_model_the_demo_chat_model_is_served(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from pathlib import Path

    import minisgl.server.args as server_args
    from minisgl.server import parse_args

    args = parse_args([])
    assert Path(args.model_path).resolve() == server_args.DEFAULT_MODEL.resolve()
    assert server_args.DEFAULT_MODEL.name == "demo-chat"
    assert (Path(args.model_path) / "model.safetensors").is_file()
    # 默认模型还没生成：报错说清楚怎么生成，而不是去 Hugging Face Hub 找一个叫 demo-chat 的仓库
    monkeypatch.setattr(server_args, "DEFAULT_MODEL", Path("/nonexistent/models/demo-chat"))
    with pytest.raises(SystemExit):
        parse_args([])
    assert "make_tiny_model.py --ensure" in capsys.readouterr().err
