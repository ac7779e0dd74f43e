"""059 的隐藏测试：负号和减号、全角字符、只认 ASCII 数字、打分的返回值。"""

from solution import last_integer, score_add_sub


def test_leading_zeros_and_zero():
    assert last_integer("0") == 0
    assert last_integer("5 - 5 = 0") == 0
    assert last_integer("结果是 007") == 7


def test_sign_only_when_not_after_a_digit():
    assert last_integer("7-3") == 3
    assert last_integer("7 -3") == -3
    assert last_integer("=-3") == -3
    assert last_integer("-(5)") == 5
    assert last_integer("-5") == -5
    assert last_integer("12－5") == 5
    assert last_integer("x-5") == -5


def test_full_width_punctuation_around_numbers():
    assert last_integer("567 － 1234 ＝ －667。") == -667
    assert last_integer("1，2，3！") == 3
    assert last_integer("答案：-667，对吗？") == -667
    assert last_integer("9999+9999=19998。") == 19998


def test_only_ascii_digits_count():
    assert last_integer("１８０１") is None
    assert last_integer("结果是 1801，不是 １７９９") == 1801
    assert last_integer("x² + 3") == 3
    assert last_integer("²") is None


def test_number_inside_words():
    assert last_integer("abc123def") == 123
    assert last_integer("第2步得到-15题") == -15


def test_empty_and_only_signs():
    assert last_integer("") is None
    assert last_integer("- －") is None


def test_result_types():
    value = last_integer("-12")
    assert type(value) is int and value == -12
    assert type(score_add_sub(1, "1")) is bool
    assert type(score_add_sub(1, "")) is bool


def test_score_uses_the_last_number():
    assert score_add_sub(1801, "1234 + 567 = 1801") is True
    assert score_add_sub(1234, "1234 + 567 = 1801") is False
    assert score_add_sub(667, "567 - 1234 = -(1234 - 567) = -667") is False
    assert score_add_sub(0, "我不会") is False
    assert score_add_sub(-667, "567 - 1234 = －667。") is True


def test_many_replies():
    for a in range(0, 10000, 997):
        for b in range(0, 10000, 1231):
            if a >= b:
                reply = f"{a} - {b} = {a - b}"
            else:
                reply = f"{a} - {b} = -({b} - {a}) = {a - b}"
            assert score_add_sub(a - b, reply) is True
            assert score_add_sub(a + b, f"{a} + {b} = {a + b}。") is True
