"""第 17 章：服务经得起负载、断开、故障和乱七八糟的输入。

- KV 不够时乐观接纳、缺页时退回请求以后重算（或整段预留、新请求等待）：全部完成、结果和单独发时
  相同、没有死锁；
- 256 个并发流式请求（官方 openai 客户端）：个个完整、格式正确、和非流式相同、用量对得上；
- 50 个客户端在随机时刻断开：之后 KV 池和请求表回到空闲，后来的请求不受影响；
- 后端进程被杀：进行中的请求得到 503 / 错误事件，启动器关掉一切、退出码非 0，不留进程和文件；
- shell 模式下后端进程被杀：停在提示符上的 shell 立刻退出（退出码非 0），而不是让用户一直等；
- 负载下 SIGTERM：退出码 0，客户端都得到回答（跑完，或者 503、错误事件），不留进程和文件；
- SIGTERM 发给整个进程组（systemd、timeout）：同样是正常的关闭，不当成后端崩溃；
- 主进程被 SIGKILL：来不及删的 socket 文件，下一个服务启动时删掉；
- schemathesis 按服务自己的 OpenAPI 模式生成合法和不合法的请求：没有 5xx、没有挂住，之后服务健康。
"""

from __future__ import annotations

import asyncio
import glob
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

NUM_PAGES, MAX_SEQ_LEN, MAX_RUNNING = 1024, 512, 64


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def ipc_files(pid: int) -> list[str]:
    return glob.glob(f"/tmp/minisgl_*.pid={pid}")


def assert_nothing_left(main_pid: int, pids: list[int]) -> None:
    """主进程退出以后：它的子进程 ``pids`` 30 秒内全部退出，``/tmp`` 里没有它的 socket 文件。"""
    deadline = time.monotonic() + 30
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(p) for p in pids)
    assert ipc_files(main_pid) == []


def kill_if_running(proc: subprocess.Popen[bytes]) -> None:
    """测试没走完时的保险：还在运行的服务连同它的进程组一起 SIGKILL。"""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def children(server: Any) -> list[int]:
    return [c.pid for c in psutil.Process(server.proc.pid).children(recursive=True)]


def worker(main_pid: int, title: str) -> psutil.Process:
    """主进程下 ps 里叫 ``title`` 的那个后端进程，例如 ``minisgl::scheduler_0``。"""
    kids = psutil.Process(main_pid).children(recursive=True)
    return next(k for k in kids if k.cmdline()[:1] == [title])


def is_idle(server: Any) -> bool:
    m = server.metrics()
    return (
        m.get("minisgl_running_requests") == 0
        and m.get("minisgl_waiting_requests") == 0
        and m["minisgl_kv_pages_free"] + m["minisgl_kv_pages_cached"]
        == m["minisgl_kv_pages_capacity"]
        and m["minisgl_request_rows_free"] == m["minisgl_request_rows_capacity"]
        and m["minisgl_http_requests_in_flight"] == 0
    )


def wait_idle(server: Any, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not is_idle(server) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert is_idle(server)


@pytest.fixture(scope="module")
def server(server_kit: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    log = tmp_path_factory.mktemp("ch17") / "server.log"
    srv = server_kit.start(
        log,
        *("--num-pages", str(NUM_PAGES), "--max-seq-len-override", str(MAX_SEQ_LEN)),
        *("--max-running-reqs", str(MAX_RUNNING)),
    )
    try:
        yield srv
    finally:
        srv.stop()


# ---------------------------------------------------------------- KV 不够：乐观接纳，缺页时退回


@pytest.mark.parametrize("headroom", ["8", "full"])
def test_kv_short_requests_are_retracted_and_recomputed(
    server_kit: Any, tmp_path: Path, headroom: str
) -> None:
    """KV 池只有 128 页（每页 1 个 token），12 个请求各要约 58 页，同时到达（先冻住调度器，
    等 API Server 把它们全收下再放开，所以它们在同一步进调度器）。

    - ``--kv-headroom 8``（乐观接纳）：每个请求只预留往后 8 个 token，一下接纳好几个，decode 中途
      缺页，最晚接纳的被退回队列、以后重算；
    - ``--kv-headroom full``（第 8 章的整段预留）：同时最多跑两个，永远不退回。

    两种都全部完成，结果和单独发时逐字相同，账目最后回到空闲。"""
    srv = server_kit.start(
        tmp_path / "kv.log",
        *("--num-pages", "128", "--max-running-reqs", "8", "--kv-headroom", headroom),
    )
    try:
        body = {"max_tokens": 48, "temperature": 0, "ignore_eos": True}
        prompts = [f"Question {i}: what is {i} + {i}?" for i in range(12)]

        def ask(p: str) -> str:
            resp = srv.post("/v1/completions", prompt=p, **body)
            assert resp.status_code == 200, resp.text
            return resp.json()["choices"][0]["text"]

        # 前提：KV 池装不下所有请求（每页 1 个 token：提示 + 48 个输出，约 58 页一个）
        assert len(prompts) * (48 + 8) > 128
        alone = [ask(p) for p in prompts[:3]]
        scheduler = worker(srv.proc.pid, "minisgl::scheduler_0")
        scheduler.suspend()
        try:
            with ThreadPoolExecutor(12) as pool:
                futures = [pool.submit(ask, p) for p in prompts]
                deadline = time.monotonic() + 60
                while srv.metrics()["minisgl_http_requests_in_flight"] < 12:
                    assert time.monotonic() < deadline, "API Server 没有收下全部请求"
                    time.sleep(0.05)
                scheduler.resume()
                together = [f.result(timeout=300) for f in futures]
        finally:
            scheduler.resume()
        assert together[:3] == alone
        assert all(len(t) > 0 for t in together)
        wait_idle(srv)  # 调度器变成空闲时一定报一次账：之后读到的退回次数是最终的
        retracted = srv.metrics()["minisgl_requests_retracted_total"]
        assert (retracted > 0) if headroom == "8" else (retracted == 0)
    finally:
        try:
            wait_idle(srv)
        finally:
            assert srv.stop() == 0


# ---------------------------------------------------------------- 负载


def test_256_concurrent_streams_with_openai_client(server: Any) -> None:
    import openai

    n, max_tokens = 256, 8
    prompts = [f"Request {i}: count to {i % 7 + 3}." for i in range(n)]

    async def run() -> tuple[list[dict[str, Any]], list[Any]]:
        def new_client() -> openai.AsyncOpenAI:
            return openai.AsyncOpenAI(
                base_url=server.url("/v1"), api_key="none", max_retries=0, timeout=300
            )

        # 两轮各用一个新客户端：第一轮早早结束的连接会空闲到整轮结束，超过 uvicorn 的
        # keep-alive（5 秒）就被服务端关掉；第二轮再拿它发请求，正好赶上关闭时就是 ReadError
        client = new_client()

        async def stream_one(prompt: str) -> dict[str, Any]:
            async with client.chat.completions.with_streaming_response.create(
                model="tiny",
                messages=[{"role": "user", "content": prompt}],
                max_tokens=max_tokens,
                temperature=0,
                stream=True,
                stream_options={"include_usage": True},
            ) as resp:
                lines = [line async for line in resp.iter_lines() if line]
            return {"status": resp.status_code, "lines": lines}

        async def whole(prompt: str) -> Any:
            return await client.chat.completions.create(
                model="tiny",
                messages=[{"role": "user", "content": prompt}],
                max_tokens=max_tokens,
                temperature=0,
            )

        streams = await asyncio.gather(*(stream_one(p) for p in prompts))
        await client.close()
        client = new_client()
        wholes = await asyncio.gather(*(whole(p) for p in prompts))
        await client.close()
        return streams, wholes

    streams, wholes = asyncio.run(run())
    for s, w in zip(streams, wholes):
        assert s["status"] == 200
        lines = s["lines"]
        assert all(line.startswith("data: ") for line in lines)
        assert lines[-1] == "data: [DONE]"
        chunks = [json.loads(line[6:]) for line in lines[:-1]]
        assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
        usage_chunk, finish_chunk, content = chunks[-1], chunks[-2], chunks[1:-2]
        assert usage_chunk["choices"] == []
        reason = finish_chunk["choices"][0]["finish_reason"]
        assert reason in ("stop", "length") and reason == w.choices[0].finish_reason
        assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-2])
        text = "".join(c["choices"][0]["delta"].get("content", "") for c in content)
        assert text == w.choices[0].message.content
        usage = usage_chunk["usage"]
        assert usage["completion_tokens"] == w.usage.completion_tokens
        # 每段文本至少一个 token；生成满时正好 max_tokens 个
        assert len(content) <= usage["completion_tokens"] <= max_tokens
        assert (usage["completion_tokens"] == max_tokens) == (reason == "length")
    assert len({w.choices[0].message.content for w in wholes}) > 1  # 不是同一个回答复制 256 遍


def test_random_disconnects_leave_nothing_behind(server: Any) -> None:
    """50 个客户端在随机时刻断开（收到几段之后、还没收到任何东西时、非流式的读超时）。
    之后 KV 池、请求表、在途请求数都回到空闲，同一个请求的结果和断开风暴之前相同。"""
    probe = {"prompt": "The capital of France is", "max_tokens": 12, "temperature": 0}
    before = server.post("/v1/completions", **probe).json()["choices"][0]["text"]
    rng = random.Random(17)
    plans = [(i, rng.choice(["stream", "stream", "early", "non-stream"]), rng.randint(0, 20))
             for i in range(50)]  # fmt: skip

    def client(plan: tuple[int, str, int]) -> None:
        i, how, after = plan
        body = {"prompt": f"story {i}", "max_tokens": 400, "ignore_eos": True}
        try:
            if how == "non-stream":
                httpx.post(server.url("/v1/completions"), json=body, timeout=0.2 + after / 20)
                return
            with httpx.stream(
                "POST", server.url("/v1/completions"), json={**body, "stream": True}, timeout=60
            ) as r:
                if how == "early":
                    return  # 响应头到了就走
                for k, _ in enumerate(r.iter_lines()):
                    if k >= after:
                        return
        except httpx.HTTPError:
            pass

    with ThreadPoolExecutor(50) as pool:
        list(pool.map(client, plans))
    deadline = time.monotonic() + 120
    while not is_idle(server):
        assert time.monotonic() < deadline, f"not idle after the disconnects: {server.metrics()}"
        time.sleep(0.1)
    assert server.post("/v1/completions", **probe).json()["choices"][0]["text"] == before
    aborted = server.log_text().count("Aborting request")
    assert aborted >= 40  # 几乎每个都是被中止的（极少数可能恰好已经结束）


# ---------------------------------------------------------------- 故障


def test_an_obviously_too_long_prompt_is_rejected_before_it_is_tokenized(
    tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tokenizer 进程只编码显然太长的提示的开头一段（上下文的 8 倍个字符），数出的 token 已经
    不少于上下文就直接回一个出错的结束回复，不发给调度器；同一轮里别的请求照常分词。没到的
    （短的、或者一个 token 很多个字符的）照常整段编码，由调度器按准确的长度检查。"""
    from minisgl.core import SamplingParams
    from minisgl.message import ReplyStatus, TokenizeMsg, UserMsg, UserReply
    from minisgl.tokenizer import TokenizerWorker
    from minisgl.utils import load_tokenizer

    tokenizer = load_tokenizer(tiny_model)
    worker = TokenizerWorker(tokenizer, eos_token_ids=[])
    worker.context_length = 256
    lengths: list[int] = []
    encode = tokenizer.__call__

    def counting(text: Any, **kwargs: Any) -> Any:
        lengths.extend(len(t) for t in ([text] if isinstance(text, str) else text))
        return encode(text, **kwargs)

    monkeypatch.setattr(type(tokenizer), "__call__", lambda self, text, **kw: counting(text, **kw))
    params = SamplingParams(max_tokens=4)
    # 120 万个字符；5,000 个空格只有 40 个 token（这个分词器里 128 个空格是一个 token）
    huge, spaced = "hello world " * 100_000, " " * 5_000
    msgs = [TokenizeMsg(1, huge, params), TokenizeMsg(2, "hi", params)]
    msgs.append(TokenizeMsg(3, spaced, params))
    backend, frontend = worker.handle(msgs)
    assert [type(m) for m in backend] == [UserMsg, UserMsg] and [m.uid for m in backend] == [2, 3]
    (reply,) = frontend
    assert isinstance(reply, UserReply) and reply.uid == 1 and reply.finished
    assert reply.status.finish_reason == "error" and isinstance(reply.status, ReplyStatus)
    why = reply.status.error or ""
    assert "counted in its first 2048 characters" in why and "context length is 256" in why
    assert max(lengths) <= len(spaced) and len(huge) not in lengths  # 整段从没交给分词器
    assert len(backend[1].input_ids) < 256  # 没被误伤：调度器照常按准确的长度检查它
    worker.context_length = None  # 不知道上下文时（直接用 TokenizerWorker）：照旧整段编码
    backend, frontend = worker.handle([TokenizeMsg(4, huge[:5000], params)])
    assert [m.uid for m in backend] == [4] and frontend == []


def test_server_rejects_a_huge_prompt_quickly(server: Any) -> None:
    """几 MB 的提示：tokenizer 进程只数开头一段就拒绝，API Server 回 400（OpenAI 格式），说明
    至少多少个 token；之后服务照常。"""
    resp = server.post("/v1/completions", prompt="hello world " * 300_000, max_tokens=4)
    assert resp.status_code == 400
    message = resp.json()["error"]["message"]
    assert "counted in its first" in message  # tokenizer 进程只数了开头一段，没有整段编码
    assert f"maximum context length is {MAX_SEQ_LEN}" in message
    ok = server.post("/v1/completions", prompt="hello", max_tokens=2)
    assert ok.status_code == 200 and ok.json()["choices"][0]["finish_reason"] == "length"


@pytest.mark.parametrize("victim", ["scheduler", "detokenizer"])
def test_backend_killed_answers_503_and_shuts_down(
    server_kit: Any, tmp_path: Path, victim: str
) -> None:
    srv = server_kit.start(tmp_path / "fault.log", "--num-pages", "2048")  # 两个请求都跑得下
    try:
        results: dict[str, Any] = {}
        long = {"prompt": "go", "max_tokens": 480, "ignore_eos": True}
        first_chunk = threading.Event()

        def stream() -> None:
            with httpx.stream(
                "POST", srv.url("/v1/completions"), json={**long, "stream": True}, timeout=60
            ) as r:
                lines = []
                for line in r.iter_lines():
                    if line:
                        lines.append(line)
                        first_chunk.set()
                results["stream"] = lines

        def non_stream() -> None:
            r = httpx.post(srv.url("/v1/completions"), json=long, timeout=60)
            results["non-stream"] = (r.status_code, r.json())

        def generate() -> None:  # 第 15 章的调试接口：和另外两个接口走同一个生成过程
            gen = {"prompt": "go", "max_tokens": 480, "ignore_eos": True}
            with httpx.stream("POST", srv.url("/generate"), json=gen, timeout=60) as r:
                results["generate"] = (r.status_code, [line for line in r.iter_lines() if line])

        threads = [threading.Thread(target=f) for f in (stream, non_stream, generate)]
        for t in threads:
            t.start()
        assert first_chunk.wait(60)
        pids = children(srv)
        title = "minisgl::scheduler_0" if victim == "scheduler" else "minisgl::detokenizer"
        worker(srv.proc.pid, title).send_signal(signal.SIGKILL)
        for t in threads:
            t.join(60)
            assert not t.is_alive(), "a client is still waiting after the backend died"
        status, body = results["non-stream"]
        assert status == 503 and "exited unexpectedly" in body["error"]["message"]
        last = json.loads(results["stream"][-1].removeprefix("data: "))  # 错误事件，没有 [DONE]
        assert "exited unexpectedly" in last["error"]["message"]
        # /generate 可能还没等到第一个 token：那就和非流式一样是 503；否则以错误事件结束
        status, lines = results["generate"]
        last = json.loads(lines[-1] if status == 503 else lines[-1].removeprefix("data: "))
        assert status in (200, 503) and "exited unexpectedly" in last["error"]["message"]
        assert srv.proc.wait(timeout=60) != 0  # 退出码非 0：外面的监控知道出事了
        assert_nothing_left(srv.proc.pid, pids)
        log = srv.log_text()
        assert "exited unexpectedly" in log and "all processes exited" in log
    finally:
        srv.kill()


def test_shell_exits_when_the_backend_dies(tiny_model: Path, wait_until: Any) -> None:
    """shell 停在提示符上（主线程堵在 input() 里）时调度器被杀：看门狗给主线程发 SIGTERM，
    shell 走正常的关闭流程退出，退出码非 0，说明原因，不留进程和 socket 文件。"""
    cmd = [sys.executable, "-m", "minisgl", "--model", str(tiny_model), "--shell"]
    cmd += ["--dtype", "float32", "--num-pages", "256", "--max-seq-len-override", "256"]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.PIPE,  # 一直开着、什么也不写：用户还没开始打字
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    out: list[bytes] = []
    fd = proc.stdout.fileno()  # type: ignore[union-attr]
    reader = threading.Thread(target=lambda: out.extend(iter(lambda: os.read(fd, 4096), b"")))
    reader.start()
    try:
        # 提示符 "> " 后面没有换行：按块读，看输出是不是停在它上面
        wait_until(lambda: b"".join(out).endswith(b"> "), 300, "the shell prompt")
        assert psutil.Process(proc.pid).cmdline()[:1] == ["minisgl::shell"]
        pids = [k.pid for k in psutil.Process(proc.pid).children(recursive=True)]
        worker(proc.pid, "minisgl::scheduler_0").send_signal(signal.SIGKILL)
        code = proc.wait(timeout=60)
        reader.join(10)
        text = b"".join(out).decode("utf-8", errors="replace")
        assert code != 0, text
        assert "exited unexpectedly" in text and "all processes exited" in text
        wait_until(lambda: not any(alive(p) for p in pids), 30, "all processes to exit")
        assert ipc_files(proc.pid) == []
    finally:
        kill_if_running(proc)


def test_shell_survives_a_rejected_turn_and_bad_bytes(tiny_model: Path) -> None:
    """shell 里一问超出了上下文：打印原因，这一问不留在历史里，下一问照常回答（不然之后的
    每一问都带着它、一样被拒绝，直到 /reset）。一行不是 UTF-8 的字节：换成 ?，照常回答，
    shell 不崩。"""
    cmd = [sys.executable, "-m", "minisgl", "--model", str(tiny_model), "--shell"]
    cmd += ["--dtype", "float32", "--num-pages", "256", "--max-seq-len-override", "64"]
    env = dict(os.environ, PYTHONUNBUFFERED="1", MINISGL_SHELL_TEMPERATURE="0")
    env["MINISGL_SHELL_MAX_TOKENS"] = "4"
    env["PYTHONIOENCODING"] = "utf-8"  # stdin 遇到坏字节就抛异常（C locale 下默认不抛）
    proc = subprocess.Popen(
        cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        env=env, start_new_session=True,
    )  # fmt: skip
    try:
        script = ("word " * 200).encode() + b"\nab\xff cd\nhi\n/exit\n"
        out, _ = proc.communicate(script, timeout=300)
    finally:
        kill_if_running(proc)
    text = out.decode("utf-8", errors="replace")
    assert proc.returncode == 0 and "Traceback" not in text, text
    from minisgl.shell import HELP

    turns = [t.rstrip("\n") for t in text.split(HELP + "\n", 1)[1].split("> ")]
    rejected, bad_bytes, hello = turns[1:4]
    assert "（没有回答：the prompt has" in rejected and "context length is 64" in rejected
    assert "WARNING" not in rejected  # 原因只说一遍，调度器的警告不插进对话
    assert bad_bytes and not bad_bytes.startswith("（没有回答")
    assert hello and not hello.startswith("（没有回答")
    assert ipc_files(proc.pid) == []


def test_health_turns_503_before_the_server_exits(server_kit: Any, tmp_path: Path) -> None:
    """没有请求在跑时后端挂了：/health 和新的请求都是 503（看门狗线程直接调用 fail）。"""
    srv = server_kit.start(tmp_path / "idle-fault.log")
    try:
        worker(srv.proc.pid, "minisgl::scheduler_0").send_signal(signal.SIGKILL)
        deadline = time.monotonic() + 30
        codes = []
        while time.monotonic() < deadline:
            try:
                codes.append(httpx.get(srv.url("/health"), timeout=5).status_code)
                if codes[-1] == 503:
                    resp = srv.post("/v1/chat/completions", prompt="hi", timeout=5)
                    codes.append(resp.status_code)
                    break
            except httpx.HTTPError:
                break  # 服务已经退出：宽限期被机器的卡顿吃掉了
            time.sleep(0.02)
        assert codes and codes[-1] == 503 and codes[-2] == 503, codes
        assert srv.proc.wait(timeout=60) == 1
    finally:
        srv.kill()


def _clients_in_flight(srv: Any, streams: int, plain: int) -> tuple[list[threading.Thread], dict]:
    """``streams`` 个流式、``plain`` 个非流式的长请求，都在途之后才返回。每个客户端结束时在
    字典里留下它看到的结局：流的最后一个事件，非流式的状态码和响应体。"""
    started = threading.Semaphore(0)
    ended: dict[str, Any] = {}
    long = {"max_tokens": 1500, "ignore_eos": True}

    def stream(i: int) -> None:
        body = {"prompt": f"go {i}", **long, "stream": True}
        try:
            with httpx.stream("POST", srv.url("/v1/completions"), json=body, timeout=60) as r:
                lines = []
                for line in r.iter_lines():
                    if line:
                        lines.append(line)
                        if len(lines) == 1:
                            started.release()  # 第一个片段到了：这个请求已经在生成
                ended[f"stream {i}"] = (r.status_code, lines[-1] if lines else "")
        except httpx.HTTPError as e:
            ended[f"stream {i}"] = (0, type(e).__name__)

    def non_stream(i: int) -> None:
        try:
            r = httpx.post(srv.url("/v1/completions"), json={"prompt": f"wait {i}", **long},
                           timeout=60)  # fmt: skip
            ended[f"plain {i}"] = (r.status_code, r.text)
        except httpx.HTTPError as e:
            ended[f"plain {i}"] = (0, type(e).__name__)

    threads = [threading.Thread(target=stream, args=(i,)) for i in range(streams)]
    threads += [threading.Thread(target=non_stream, args=(i,)) for i in range(plain)]
    for t in threads:
        t.start()
    for _ in range(streams):
        assert started.acquire(timeout=120)
    # 非流式的没有片段可等：等 API Server 自己的账上 streams + plain 个请求都在途
    deadline = time.monotonic() + 60
    while srv.metrics()["minisgl_http_requests_in_flight"] < streams + plain:
        assert time.monotonic() < deadline, srv.metrics()
        time.sleep(0.05)
    return threads, ended


def _each_client_got_an_answer(ended: dict[str, Any], reason: str) -> None:
    """每个客户端都以 OpenAI 的格式结束：流以 ``[DONE]``（来得及跑完）或者一条说明原因的错误
    事件结束，非流式的是 200 或者 JSON 的 503——不是纯文本的 500，也不是半路断开。"""
    for who, (status, last) in ended.items():
        if who.startswith("stream"):
            assert status == 200 and last.startswith("data: "), (who, status, last)
            if last != "data: [DONE]":
                assert reason in json.loads(last.removeprefix("data: "))["error"]["message"], who
        elif status != 200:
            assert status == 503 and reason in json.loads(last)["error"]["message"], (who, last)


def test_sigterm_under_load_exits_cleanly(server_kit: Any, tmp_path: Path) -> None:
    """负载下 SIGTERM：还没跑完的请求马上得到 503 或者错误事件（来得及的也可能正常跑完），
    退出码 0，不留进程和文件，日志里没有 uvicorn 取消处理函数的 traceback。"""
    srv = server_kit.start(tmp_path / "term.log", "--max-running-reqs", "16")
    try:
        threads, ended = _clients_in_flight(srv, streams=12, plain=4)
        pids = children(srv)
        srv.proc.send_signal(signal.SIGTERM)
        assert srv.proc.wait(timeout=60) == 0
        for t in threads:
            t.join(60)
        assert len(ended) == 16  # 没有一个客户端挂住
        _each_client_got_an_answer(ended, "shutting down")
        assert_nothing_left(srv.proc.pid, pids)
        log = srv.log_text()
        assert "Traceback" not in log and "exited unexpectedly" not in log, log[-3000:]
    finally:
        srv.kill()


def test_failing_after_the_event_loop_closed_does_nothing() -> None:
    """空闲的服务收到信号以后很快就关掉了事件循环；叫醒等待者的线程（或者看门狗）要是这之后才
    轮到运行，已经没有事件循环可用：``fail_from_thread`` 什么也不做，而不是在那个线程里抛出
    "Event loop is closed"、在日志里留下一段 traceback。"""
    from minisgl.server.frontend import FrontendManager

    async def listen_once() -> asyncio.Task[None]:
        return asyncio.create_task(asyncio.sleep(0))

    frontend: Any = FrontendManager(config=None, send_tokenizer=None, recv_tokenizer=None)
    frontend.listener = asyncio.run(listen_once())  # asyncio.run 返回时已经关掉了事件循环
    assert frontend.listener.get_loop().is_closed()
    frontend.fail_from_thread("the server is shutting down", stopping=True)
    assert frontend.failure is None  # 没有排进任何事件循环，也没有异常


def test_sigterm_to_the_whole_process_group_is_a_clean_stop(
    server_kit: Any, tmp_path: Path
) -> None:
    """systemd（默认的 KillMode）、``timeout`` 把 SIGTERM 发给整个进程组：调度器和主进程同时
    收到，调度器先死。这不是崩溃：客户端得到 503 / 错误事件，退出码 0，日志里没有"意外退出"。"""
    srv = server_kit.start(tmp_path / "group.log", "--max-running-reqs", "16")
    try:
        threads, ended = _clients_in_flight(srv, streams=4, plain=2)
        pids = children(srv)
        os.killpg(srv.proc.pid, signal.SIGTERM)  # 服务自己一个会话：进程组号就是主进程的 pid
        assert srv.proc.wait(timeout=60) == 0
        for t in threads:
            t.join(60)
        assert len(ended) == 6
        # 两个说法都可能：调度器先死时是看门狗的"被停下"，主进程的宽限期先到时是"正在关闭"
        for who, (status, last) in ended.items():
            reason = "was stopped" if "was stopped" in last else "shutting down"
            _each_client_got_an_answer({who: (status, last)}, reason)
        assert_nothing_left(srv.proc.pid, pids)
        log = srv.log_text()
        assert "exited unexpectedly" not in log and "all processes exited" in log, log[-3000:]
    finally:
        srv.kill()


def test_an_abort_that_overtakes_its_request_is_sent_again() -> None:
    """几个 tokenizer 进程时，请求和它的中止可能分给两个进程，中止先到调度器、被当成不认识的 uid
    忽略。API Server 记着"收到第一条回复之前就中止了"的请求：它的回复一到（调度器照样在跑它），
    再发一次中止；结束的回复（中止生效了，或者本来就跑完了）到了就不用再发。不起服务：两个
    队列换成记录消息的假队列，回复由测试按顺序喂给 ``listen()``。"""
    from minisgl.core import SamplingParams
    from minisgl.message import AbortMsg, ReplyStatus, TokenizeMsg, UserReply
    from minisgl.server.frontend import FrontendManager

    class Sent:
        def __init__(self) -> None:
            self.msgs: list[Any] = []

        async def put(self, msg: Any) -> None:
            self.msgs.append(msg)

    class Replies:
        def __init__(self) -> None:
            self.queue: asyncio.Queue[Any] = asyncio.Queue()

        async def get(self) -> Any:
            return await self.queue.get()

    def reply(uid: int, finished: bool) -> UserReply:
        return UserReply(
            uid, "x", finished, ReplyStatus(finish_reason="abort" if finished else None)
        )

    async def run() -> list[Any]:
        sent, replies = Sent(), Replies()
        frontend: Any = FrontendManager(config=None, send_tokenizer=sent, recv_tokenizer=replies)
        overtaken, answered, aborted = [await frontend.submit("hi", SamplingParams())
                                        for _ in range(3)]  # fmt: skip
        await frontend.abort_user(overtaken)  # 还没有回复时中止：中止赶在了请求前面
        replies.queue.put_nowait(reply(answered, False))  # 先有回复，再中止：调度器一定认得
        await asyncio.sleep(0)
        await frontend.abort_user(answered)
        await frontend.abort_user(aborted)  # 没有回复时中止，中止也生效了：下一条就是结束
        for uid, finished in [(overtaken, False), (overtaken, False), (answered, False),
                              (aborted, True), (overtaken, True)]:  # fmt: skip
            replies.queue.put_nowait(reply(uid, finished))
        while not replies.queue.empty():
            await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert frontend.unanswered == set() and frontend.early_aborts == set()
        frontend.listener.cancel()
        return [(type(m), m.uid) for m in sent.msgs]

    msgs = asyncio.run(run())
    tokenize = [(TokenizeMsg, uid) for uid in range(3)]
    # overtaken 的第一条回复来时再中止一次（只一次）；answered、aborted 各只中止一次
    assert msgs == [*tokenize, (AbortMsg, 0), (AbortMsg, 1), (AbortMsg, 2), (AbortMsg, 0)]


def test_sigkilled_server_leaves_no_socket_file_behind(
    server_kit: Any, tmp_path: Path, wait_until: Any
) -> None:
    """主进程在流式输出的中途被 SIGKILL：它什么也来不及做，子进程被内核一并杀掉，
    谁都没有删 socket 文件。下一个服务启动时认出它们（文件名里的 PID 已经不存在），删掉。"""
    srv = server_kit.start(tmp_path / "killed.log")
    try:
        pids = children(srv)
        assert ipc_files(srv.proc.pid) != []
        body = {"prompt": "go", "max_tokens": 400, "ignore_eos": True, "stream": True}
        with httpx.stream("POST", srv.url("/v1/completions"), json=body, timeout=60) as r:
            assert next(line for line in r.iter_lines() if line).startswith("data: ")
            srv.proc.send_signal(signal.SIGKILL)  # 只杀主进程
            srv.proc.wait(timeout=30)  # 收尸：之后这个 PID 就不存在了
        wait_until(lambda: not any(alive(p) for p in pids), 30, "the children to exit")
    finally:
        srv.kill()
    # 这时文件还在（除非并行的别的测试先起了一个服务，替我们删了）
    nxt = server_kit.start(tmp_path / "next.log")
    try:
        assert ipc_files(srv.proc.pid) == []
        assert ipc_files(nxt.proc.pid) != []  # 活着的服务的文件不碰
    finally:
        assert nxt.stop() == 0
    assert ipc_files(nxt.proc.pid) == []


def test_remove_stale_ipc_files_only_touches_dead_owners(ipc_dir: str) -> None:
    """只删主进程已经不在的 socket 文件：活着的服务的不碰，同名的普通文件不碰，别的名字不碰。"""
    import socket

    from minisgl.utils import remove_stale_ipc_files

    dead = subprocess.Popen(["true"])
    dead.wait()  # 已经收尸：这个 PID 不存在了（短时间内不会被重用）

    def bind(name: str) -> str:
        path = os.path.join(ipc_dir, name)
        with socket.socket(socket.AF_UNIX) as s:
            s.bind(path)  # 关掉 socket 之后文件还在，就像被 SIGKILL 的进程留下的
        return path

    stale = [bind(f"minisgl_{n}.pid={dead.pid}") for n in (0, 3)]
    mine = bind(f"minisgl_0.pid={os.getpid()}")
    other = bind(f"other_0.pid={dead.pid}")
    plain = os.path.join(ipc_dir, f"minisgl_1.pid={dead.pid}")
    Path(plain).write_text("not a socket")
    assert sorted(remove_stale_ipc_files(ipc_dir)) == sorted(stale)
    assert sorted(os.listdir(ipc_dir)) == sorted(os.path.basename(p) for p in (mine, other, plain))
    assert remove_stale_ipc_files(os.path.join(ipc_dir, "missing")) == []


# ---------------------------------------------------------------- 模糊测试


@pytest.mark.parametrize(("temperature", "top_p"), [(5e-324, 1.0), (1.0, 5e-324), (1e-7, 1e-300)])
def test_tiny_temperature_and_top_p_do_not_produce_nan(temperature: float, top_p: float) -> None:
    """模糊测试找到的第一个崩溃：这些数变成 float32 就是 0，除出 inf、nan，调度器进程挂掉。
    现在它们的效果和贪心相同：只留概率最大的那个 token。"""
    import torch

    from minisgl.core import SamplingParams
    from minisgl.engine.sample import BatchSamplingArgs, Sampler

    logits = torch.randn(4, 1000)
    params = [SamplingParams(temperature=temperature, top_p=top_p, top_k=3557)] * 4
    args = BatchSamplingArgs.from_params(params, 1000, "cpu")
    assert torch.equal(Sampler("cpu").sample(logits, args), logits.argmax(-1))
    with pytest.raises(ValueError, match="top_p"):  # 0 仍然不合法：先校验、再抬到最小正规数
        BatchSamplingArgs.from_params([SamplingParams(temperature=1.0, top_p=0.0)], 1000, "cpu")


FUZZ_EXAMPLES = 25  # 每个接口、每种模式（合法 / 不合法）的用例数
FUZZ_MAX_TOKENS = 16  # 每个用例最多生成这么多 token
FUZZ_TIMEOUT = 60.0  # 每个请求的时限：超时记为失败，不重试、不缩小用例


def test_fuzz_openapi_schema(server: Any) -> None:
    """schemathesis 读服务自己的 OpenAPI 模式，为每个接口生成合法（positive）和故意不合法
    （negative）的请求。要求：没有 5xx，每个请求都在时限内返回；结束后服务健康、账目回到空闲。

    每个用例的生成长度都有上限：``max_tokens`` 大于 16 的压到 16，生成接口没给的补上 16（对话接口
    没给时会一直生成到上下文用完）——只为了让用例跑得快，合法与否的类别不变。超时和 5xx 一样记为
    失败，不让 hypothesis 去缩小用例（每次缩小都要再等一个超时）。"""
    import requests
    import schemathesis
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis.errors import Unsatisfiable
    from schemathesis import GenerationMode

    spec = httpx.get(server.url("/openapi.json"), timeout=30).json()
    schema = schemathesis.openapi.from_dict(spec)
    ran: dict[str, int] = {}
    failures: list[str] = []
    for result in schema.get_all_operations():
        op = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @settings(
                max_examples=FUZZ_EXAMPLES,
                deadline=None,
                database=None,
                derandomize=True,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            @given(op.as_strategy(generation_mode=mode))
            def check(case: Any) -> None:
                body = case.body
                name = f"{case.method} {case.path}"
                if isinstance(body, dict):
                    keys = ("max_tokens", "max_completion_tokens")
                    for key in keys:
                        value = body.get(key)
                        if type(value) is int and FUZZ_MAX_TOKENS < value < 10**6:
                            body[key] = FUZZ_MAX_TOKENS
                    if case.path.endswith("completions") and not any(body.get(k) for k in keys):
                        body["max_tokens"] = FUZZ_MAX_TOKENS
                ran[name] = ran.get(name, 0) + 1
                try:
                    response = case.call(base_url=server.url(""), timeout=FUZZ_TIMEOUT)
                except requests.RequestException as e:  # 超时、连接断了：服务没有回答
                    failures.append(f"{name} {body!r:.300} -> {type(e).__name__}")
                    return
                if response.status_code >= 500:
                    failures.append(f"{name} {body!r:.300} -> {response.status_code}")

            try:
                check()
            except Unsatisfiable:  # 没有参数的 GET、HEAD 接口：造不出"不合法"的请求
                assert mode == GenerationMode.NEGATIVE and op.method.lower() in ("get", "head")
    assert not failures, failures[:5]
    assert sum(ran.values()) >= 6 * FUZZ_EXAMPLES // 2, ran
    assert httpx.get(server.url("/health"), timeout=30).status_code == 200
    wait_idle(server, timeout=60)
