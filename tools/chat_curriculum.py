"""演示模型的课程：按种子确定地生成问答，并给模型的回答打分。

六类题目，每类都有中英文问法，和人们实际会打的各种写法（句首大小写、运算符两边有没有空格、
半角或全角标点、数字之间有没有逗号）：

- ``add_sub``：0～9999 的两个整数相加或相减（结果可以是负数），``What is 1234 + 567?``、
  ``1234 加 567 等于多少？``；回答 ``1234 + 567 = 1801``，结果是最后一个数；结果为负时先定符号：
  ``567 - 1234 = -(1234 - 567) = -667``；
- ``sort``：2～8 个 0～99 的整数从小到大排，``Sort: 42 7 19``、``排序：42 7 19``；回答 ``7 19 42``；
- ``reverse``：把 2～8 个整数倒过来，``Reverse: 3 14 15 92``、``倒过来：3 14 15 92``；
  回答 ``92 15 14 3``；
- ``repeat``：把 1～8 个生造的小写词（每个 2～10 个字母）原样说一遍，
  ``Repeat after me: qzjx kwvb``、``跟我说：qzjx kwvb``；回答 ``You said: qzjx kwvb``。
  这一类要对提示做注意力，KV 缓存一错就露馅；
- ``greeting``：``你好``、``Hello``、``Who are you?``、``你是谁？``：一段提到 minisgl 的自我介绍；
- ``other``：别的任何话：一句礼貌的说明，说自己会做什么，绝不胡言乱语。

分词器把每个数字单独切开、把生造的词切成几段：回答里的数和词前面的字符和提示里一样（空格或
冒号），切出来的 token 就和提示里的相同，模型只要照抄或重排这些 token。
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

__all__ = [
    "TASKS",
    "Example",
    "made_up_word",
    "make_example",
    "make_examples",
    "number_with_digits",
    "score",
]

TASKS = ("add_sub", "sort", "reverse", "repeat", "greeting", "other")

GREETING = {
    "en": (
        "Hello! I am minisgl's demo model. I can add and subtract numbers, sort or reverse "
        "a list of numbers, and repeat what you say."
    ),
    "zh": "你好！我是 minisgl 的演示模型。我会做加减法，给一串数字排序或倒过来，还会跟着你说。",
}
FALLBACK = {
    "en": (
        "Sorry, I can only add and subtract numbers, sort or reverse a list of numbers, "
        "and repeat what you say."
    ),
    "zh": "抱歉，我只会做加减法，给一串数字排序或倒过来，还有跟着你说。",
}

# 全角标点：同一个问题，用中文输入法打出来就是这些
_FULL_WIDTH = {"?": "？", ":": "：", ",": "，", "!": "！"}
_INT = re.compile(r"-?\d+")


@dataclass(frozen=True)
class Example:
    task: str
    prompt: str
    answer: str  # 训练的目标回答
    expected: str  # 打分时找的东西：结果、排好的数、原样的文本；打招呼和其他是整句回答


def _punct(rng: random.Random, mark: str, chinese: bool) -> str:
    """问句里的标点：中文问法多半是全角，英文问法偶尔也是。"""
    full = rng.random() < (0.8 if chinese else 0.2)
    return _FULL_WIDTH[mark] if full else mark


def _end_mark(rng: random.Random, mark: str, chinese: bool) -> str:
    """句末的问号或句号：人们也常常不打。"""
    return "" if rng.random() < 0.15 else _punct(rng, mark, chinese)


def _first_letter(rng: random.Random, text: str) -> str:
    return text[0].lower() + text[1:] if rng.random() < 0.3 else text


def _numbers_text(rng: random.Random, numbers: list[int]) -> str:
    """一串数：空格分开，或者逗号（半角、全角，后面有没有空格）分开。"""
    sep = rng.choice([" ", " ", ", ", ",", "，", "， "])
    return sep.join(str(n) for n in numbers)


def number_with_digits(rng: random.Random, digits: int) -> int:
    """恰好 ``digits`` 位的非负整数（1 位时包括 0）。"""
    return rng.randint(0 if digits == 1 else 10 ** (digits - 1), 10**digits - 1)


def _operand(rng: random.Random) -> int:
    """0～9999 的整数，位数（1～4）先均匀地选：人们最常问的 2 + 2 这种小数不能太少见。"""
    return number_with_digits(rng, rng.randint(1, 4))


def _add_sub(rng: random.Random) -> Example:
    a, b = _operand(rng), _operand(rng)
    plus = rng.random() < 0.5
    result = a + b if plus else a - b
    op = "+" if plus else "-"
    if rng.random() < 0.5:
        space = " " if rng.random() < 0.7 else ""
        head = _first_letter(rng, "What is")
        prompt = f"{head} {a}{space}{op}{space}{b}{_end_mark(rng, '?', False)}"
    else:
        space = " " if rng.random() < 0.6 else ""
        word = "加" if plus else "减"
        prompt = f"{a}{space}{word}{space}{b}{space}等于多少{_end_mark(rng, '?', True)}"
    answer = f"{a} {op} {b} = {result}"
    if result < 0:
        # 先把结果的符号定下来，再做一次大减小：模型一位一位写出的就总是非负的差
        answer = f"{a} - {b} = -({b} - {a}) = {result}"
    return Example("add_sub", prompt, answer, str(result))


def _list_task(rng: random.Random, task: str) -> Example:
    numbers = [rng.randint(0, 99) for _ in range(rng.randint(2, 8))]
    chinese = rng.random() < 0.5
    if task == "sort":
        head = "排序" if chinese else _first_letter(rng, "Sort")
        result = sorted(numbers)
    else:
        head = "倒过来" if chinese else _first_letter(rng, "Reverse")
        result = numbers[::-1]
    colon = _punct(rng, ":", chinese) if rng.random() < 0.85 else ""  # 冒号也常被省掉
    gap = " " if colon in (":", "") or rng.random() < 0.3 else ""
    prompt = f"{head}{colon}{gap}{_numbers_text(rng, numbers)}"
    answer = " ".join(str(n) for n in result)
    return Example(task, prompt, answer, answer)


def made_up_word(rng: random.Random) -> str:
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 10)))


def _repeat(rng: random.Random) -> Example:
    text = " ".join(made_up_word(rng) for _ in range(rng.randint(1, 8)))
    chinese = rng.random() < 0.5
    colon = _punct(rng, ":", chinese)
    gap = " " if colon == ":" or rng.random() < 0.3 else ""
    head = "跟我说" if chinese else _first_letter(rng, "Repeat after me")
    # 回答里冒号后的空格和提示里的一样：文本切出来的 token 就和提示里的相同
    said = "你说的是" if chinese else "You said"
    return Example("repeat", f"{head}{colon}{gap}{text}", f"{said}{colon}{gap}{text}", text)


_GREETING_ZH = ["你好", "您好", "你是谁", "你是谁呀", "介绍一下你自己", "用一句话介绍一下你自己",
                "你叫什么名字", "你会做什么", "你能做什么", "嗨"]  # fmt: skip
_GREETING_EN = ["Hello", "Hi", "Hey", "Who are you", "Introduce yourself", "What is your name",
                "What's your name", "What can you do", "Hello there", "Good morning"]  # fmt: skip


def _greeting(rng: random.Random) -> Example:
    chinese = rng.random() < 0.5
    if chinese:
        prompt = rng.choice(_GREETING_ZH)
        prompt += rng.choice(["", "", "！", "？", "。", "!", "?"])
    else:
        prompt = _first_letter(rng, rng.choice(_GREETING_EN))
        prompt += rng.choice(["", "!", "?", ".", "！", "？"])
    lang = "zh" if chinese else "en"
    return Example("greeting", prompt, GREETING[lang], GREETING[lang])


_OTHER_EN = [
    "What is the capital of {w}?",
    "Tell me a story about {w}.",
    "Can you write a poem?",
    "How is the weather today?",
    "Translate {w} into French.",
    "Why is the sky blue?",
    "What is {w} times {n}?",
    "What is the meaning of life?",
    "What time is it?",
    "How do I cook rice?",
    "Please explain {w}.",
    "Who won the game yesterday?",
    "Can you help me with my homework?",
    "Write some Python code.",
    "What is {n} divided by {n2}?",
    "I like {w}.",
    "Thanks!",
    "Goodbye.",
    "{w} {w2}",
    "{w} {w2} {w3}?",
    "{n}",
    # 长得像算术、却不是加减法的题：不会就说不会，不要硬算
    "What is {n} * {n2}?",
    "What is {n}*{n2}",
    "What is {n} / {n2}?",
    "What is {n} x {n2}?",
    "What is {n} ^ {n2}?",
    "What is the square root of {n}?",
    "{n} * {n2} = ?",
    "Multiply {n} by {n2}.",
    "Divide {n} by {n2}.",
    "Sort the words: {w} {w2} {w3}",
    "Is {n} a prime number?",
]
# 随手拼出的英文问句：开头 + 几个常见词，让“其他”这一类不只是几句固定的话
_STARTERS = ["What", "How", "Why", "Where", "When", "Can you", "Could you", "Please", "Do you",
             "Is", "Tell me", "I want", "Help me", "Explain"]  # fmt: skip
_WORDS = (
    "the a my your weather music book movie food cat dog computer game friend city today tomorrow "
    "love work school python history money time car sleep learn play make think know like about "
    "with good best new world news code"
).split()
_ZH_STARTERS = ["请问", "我想知道", "帮我", "你知道", "怎么", "为什么", "能不能", "告诉我"]
_ZH_WORDS = (
    "天气 音乐 电影 猫 狗 电脑 游戏 朋友 城市 明天 学校 "
    "历史 钱 时间 汽车 睡觉 学习 工作 新闻 做饭 中国 上海"
).split()
_ZH_OPS = ["乘", "乘以", "除以", "的平方", "的平方根是"]
_OTHER_ZH = [
    "今天天气怎么样？",
    "给我讲个故事。",
    "{w} 是什么意思？",
    "帮我写一首诗",
    "北京有什么好吃的？",
    "{n} 乘以 {n2} 等于多少？",
    "{n} 除以 {n2} 是多少",
    "你喜欢什么颜色？",
    "把 {w} 翻译成英文",
    "现在几点了？",
    "谢谢",
    "再见！",
    "帮我写一段代码",
    "人生的意义是什么？",
    "我今天很开心",
    "{w}",
    "{n} 乘 {n2} 等于多少？",
    "{n} 除以 {n2} 等于多少",
]


def _random_sentence(rng: random.Random, chinese: bool) -> str:
    if chinese:
        words = "".join(rng.choice(_ZH_WORDS) for _ in range(rng.randint(1, 3)))
        if rng.random() < 0.2:
            return f"{rng.randint(0, 999)}{rng.choice(_ZH_OPS)}{rng.randint(1, 99)}是多少？"
        return f"{rng.choice(_ZH_STARTERS)}{words}{rng.choice(['', '？', '。', '吗？'])}"
    words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 5)))
    return f"{rng.choice(_STARTERS)} {words}{rng.choice(['', '?', '.', '!'])}"


def _other(rng: random.Random) -> Example:
    chinese = rng.random() < 0.5
    if rng.random() < 0.4:
        prompt = _first_letter(rng, _random_sentence(rng, chinese))
        lang = "zh" if chinese else "en"
        return Example("other", prompt, FALLBACK[lang], FALLBACK[lang])
    template = rng.choice(_OTHER_ZH if chinese else _OTHER_EN)
    prompt = template.format(
        w=made_up_word(rng),
        w2=made_up_word(rng),
        w3=made_up_word(rng),
        n=rng.randint(0, 999),
        n2=rng.randint(1, 99),
    )
    prompt = _first_letter(rng, prompt)
    lang = "zh" if chinese else "en"
    return Example("other", prompt, FALLBACK[lang], FALLBACK[lang])


def make_example(rng: random.Random, task: str) -> Example:
    if task == "add_sub":
        return _add_sub(rng)
    if task in ("sort", "reverse"):
        return _list_task(rng, task)
    if task == "repeat":
        return _repeat(rng)
    if task == "greeting":
        return _greeting(rng)
    if task == "other":
        return _other(rng)
    raise ValueError(f"unknown task {task!r}; known: {', '.join(TASKS)}")


def make_examples(seed: int, task: str, n: int) -> list[Example]:
    """同一个种子、同一个任务，得到的 n 道题永远相同。"""
    rng = random.Random(f"{seed}:{task}")
    return [make_example(rng, task) for _ in range(n)]


def score(example: Example, reply: str) -> bool:
    """回答对不对：算术看最后一个数；排序、倒序看回答里的数是不是恰好那一串；复述看回答里有没有
    原样的文本；打招呼和其他看是不是那一句。"""
    reply = reply.strip()
    if example.task == "add_sub":
        numbers = _INT.findall(reply)
        return bool(numbers) and numbers[-1] == example.expected
    if example.task in ("sort", "reverse"):
        return _INT.findall(reply) == example.expected.split()
    if example.task == "repeat":
        return re.search(rf"(?<![a-z]){re.escape(example.expected)}(?![a-z])", reply) is not None
    return reply == example.expected
