"""第 13 章：分词——对话套模板（并加上"轮到助手"的提示），字符串原样编码，整批处理。"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import torch

from minisgl.core import SamplingParams
from minisgl.message import TokenizeMsg
from minisgl.tokenizer import TokenizeManager
from minisgl.utils import load_tokenizer

CHAT = [
    {"role": "system", "content": "你是一个简洁的助手。"},
    {"role": "user", "content": "Name three colors, 用中文。"},
]


@pytest.fixture(scope="module")
def tokenizer(tiny_model: Path) -> Any:
    return load_tokenizer(tiny_model)


def msg(uid: int, text: Any) -> TokenizeMsg:
    return TokenizeMsg(uid=uid, text=text, sampling_params=SamplingParams())


def test_chat_goes_through_the_template(tokenizer: Any) -> None:
    (ids,) = TokenizeManager(tokenizer).tokenize([msg(0, CHAT)])
    assert ids.dtype == torch.int32 and ids.dim() == 1 and ids.device.type == "cpu"
    text = tokenizer.decode(ids.tolist())
    assert text == (
        "<|im_start|>system\n你是一个简洁的助手。<|im_end|>\n"
        "<|im_start|>user\nName three colors, 用中文。<|im_end|>\n"
        "<|im_start|>assistant\n"  # add_generation_prompt=True：轮到助手说话
    )
    # 和 transformers 自己"渲染 + 编码"的结果逐个相同
    expected = tokenizer.apply_chat_template(CHAT, tokenize=True, add_generation_prompt=True)
    if not isinstance(expected, list):  # transformers 5 返回 BatchEncoding
        expected = expected["input_ids"]
    assert ids.tolist() == expected


def test_raw_prompt_is_encoded_as_is(tokenizer: Any) -> None:
    prompt = "<|im_start|>user\n你好"  # 像模板，但它只是一个字符串：不再套一层
    manager = TokenizeManager(tokenizer)
    (raw,) = manager.tokenize([msg(0, prompt)])
    assert raw.tolist() == tokenizer.encode(prompt)
    assert tokenizer.decode(raw.tolist()) == prompt
    (chat,) = manager.tokenize([msg(1, [{"role": "user", "content": prompt}])])
    assert len(chat) > len(raw)  # 同样的文字当作对话内容，外面多了模板的 token


def test_batch_equals_one_by_one(tokenizer: Any) -> None:
    emoji = [{"role": "user", "content": "😀🫠"}]
    texts: list[Any] = [CHAT, "Hello world", emoji, "从前有座山", ""]
    manager = TokenizeManager(tokenizer)
    batch = manager.tokenize([msg(i, t) for i, t in enumerate(texts)])
    single = [manager.tokenize([msg(i, t)])[0] for i, t in enumerate(texts)]
    assert [b.tolist() for b in batch] == [s.tolist() for s in single]
    assert batch[4].tolist() == [] and batch[4].dtype == torch.int32  # 空字符串：空张量


def test_bad_request_gets_an_empty_prompt(tokenizer: Any) -> None:
    """渲染失败的请求得到空张量（调度器会以"提示为空"拒绝它），同一批里别的请求不受影响。"""
    manager = TokenizeManager(tokenizer)
    bad: Any = {"role": "user", "content": "不是列表"}
    out = manager.tokenize([msg(0, "ok"), msg(1, bad), msg(2, [1, 2, 3]), msg(3, "ok")])
    assert [len(t) for t in out][1:3] == [0, 0]
    assert out[0].tolist() == out[3].tolist() == tokenizer.encode("ok")
    # 模板本身出错（这里让它主动报错）：一样得到空张量，而不是让进程崩掉
    strict = copy.copy(tokenizer)
    strict.chat_template = "{{ raise_exception('only user messages, please') }}"
    (ids,) = TokenizeManager(strict).tokenize([msg(4, CHAT)])
    assert ids.tolist() == []


def test_a_prompt_longer_than_the_tokenizer_limit_is_encoded_quietly(
    tiny_model: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """比分词器的 ``model_max_length`` 长的提示照样整段编码、不截断，也不打 transformers 那条
    "送进模型会越界"的警告：长度由调度器检查，过长的请求得到错误，进不了模型。"""
    tokenizer = load_tokenizer(tiny_model)  # 新的一个：同一个分词器，这条警告 transformers 只打一次
    words = tokenizer.model_max_length + 10

    def warned() -> bool:
        return any("longer than the specified maximum" in r.getMessage() for r in caplog.records)

    with caplog.at_level("WARNING"):
        (ids,) = TokenizeManager(tokenizer).tokenize([msg(0, "a " * words)])
        assert len(ids) > tokenizer.model_max_length and not warned()
        tokenizer(["a " * words])  # 对照：直接编码时有这条警告，上面的断言才有意义
        assert warned()
