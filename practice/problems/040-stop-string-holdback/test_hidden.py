"""040 的隐藏测试：重叠、多个停止字符串、最早出现、尽早发出、flush、随机切分。"""

import random

from solution import StopMatcher


def same(actual, expected):
    """类型和取值都一致才算对：type 逐层相同（list/tuple/dict 递归进去），最后才比 ==。

    只比 == 的话，返回 1 冒充 1.0、True 冒充 1，或者返回一个和谁比都相等的对象，都能蒙混过关。
    """
    if type(actual) is not type(expected):
        return False
    if isinstance(expected, (list, tuple)):
        return len(actual) == len(expected) and all(map(same, actual, expected))
    if isinstance(expected, dict):
        keys_match = actual.keys() == expected.keys()
        return keys_match and all(same(actual[k], expected[k]) for k in expected)
    return bool(expected == actual)


def run(stops, pieces):
    m = StopMatcher(stops)
    out, stopped = [], False
    for p in pieces:
        text, stopped = m.feed(p)
        out.append(text)
        if stopped:
            break
    if not stopped:
        out.append(m.flush())
    return out, stopped


def reference(stops, full):
    """最先完整出现的停止字符串：(结束位置, 开始位置) 最小的那一次出现。"""
    hits = [(i + len(s), i) for s in stops if (i := full.find(s)) >= 0]
    return (full[: min(hits)[1]], True) if hits else (full, False)


def safe_prefix(stops, full):
    """不含停止字符串时，此刻最多能发出多少：去掉最长的"某个停止字符串的真前缀"的结尾。"""
    for n in range(len(full), 0, -1):
        tail = full[-n:]
        if any(len(s) > n and s.startswith(tail) for s in stops):
            return full[:-n]
    return full


def test_empty_stop_rejected():
    try:
        StopMatcher(["ok", ""])
    except ValueError:
        return
    raise AssertionError("空的停止字符串应当抛 ValueError")


def test_overlapping_prefix():
    m = StopMatcher(["aab"])
    assert same(m.feed("a"), ("", False))
    assert same(m.feed("a"), ("", False))
    assert same(m.feed("ab"), ("a", True))  # 全文 "aaab"：停止字符串从第 1 个字符开始


def test_overlapping_holdback_shrinks():
    m = StopMatcher(["abc"])
    assert same(m.feed("ab"), ("", False))
    assert same(m.feed("ab"), ("ab", False))  # "abab"：前面的 "ab" 已经不可能是开头了
    assert same(m.feed("c"), ("", True))


def test_earliest_occurrence_wins_not_list_order():
    m = StopMatcher(["world", "o w"])
    assert same(m.feed("hello world"), ("hell", True))


def test_first_completed_wins_however_the_text_is_split():
    for pieces in (["abcd"], ["a", "b", "c", "d"], ["ab", "cd"]):
        assert same("".join(run(["abcd", "bc"], pieces)[0]), "a"), pieces
    assert same("".join(run(["bc", "abc"], ["xabc"])[0]), "x")  # 同时结束：开始得更早的


def test_stop_in_the_middle_of_one_piece():
    assert same(run(["STOP"], ["abcSTOPdef"]), (["abc"], True))


def test_stop_spanning_many_pieces():
    assert same(
        run(["<|end|>"], ["x<", "|", "e", "n", "d", "|", ">y"]),
        (
            ["x", "", "", "", "", "", ""],
            True,
        ),
    )


def test_flush_releases_a_false_alarm():
    m = StopMatcher(["</answer>"])
    assert same(m.feed("a </ans"), ("a ", False))
    assert same(m.flush(), "</ans")
    assert same(m.flush(), "")


def test_flush_after_stop_is_empty():
    m = StopMatcher(["x"])
    assert same(m.feed("abxcd"), ("ab", True))
    assert same(m.flush(), "")


def test_unicode_stops():
    assert same(run(["。\n"], ["第一句", "。", "\n第二句"]), (["第一句", "", ""], True))


def test_random_pieces_match_reference_and_emit_early():
    rng = random.Random(0)
    alphabet = "ab#。\n"
    for _ in range(400):
        stops = [
            "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 4)))
            for _ in range(rng.randint(1, 3))
        ]
        full = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 20)))
        cuts = sorted(rng.sample(range(len(full) + 1), min(len(full) + 1, rng.randint(0, 6))))
        pieces = [full[a:b] for a, b in zip([0, *cuts], [*cuts, len(full)])]
        m = StopMatcher(stops)
        sent, seen, stopped = "", "", False
        for p in pieces:
            seen += p
            text, stopped = m.feed(p)
            sent += text
            if stopped:
                break
            assert same(sent, safe_prefix(stops, seen)), (stops, pieces)
        if not stopped:
            sent += m.flush()
        assert same((sent, stopped), reference(stops, full)), (stops, pieces)
