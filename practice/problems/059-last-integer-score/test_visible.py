"""059 的可见测试：题面里的示例。"""

from solution import last_integer, score_add_sub


def test_plain_sum():
    assert last_integer("1234 + 567 = 1801") == 1801


def test_negative_result():
    assert last_integer("567 - 1234 = -(1234 - 567) = -667") == -667


def test_full_width_period_and_minus():
    assert last_integer("答：结果是 1801。") == 1801
    assert last_integer("结果（－667）") == -667


def test_hyphen_after_digit_is_subtraction():
    assert last_integer("1234-567") == 567


def test_no_number():
    assert last_integer("我不会") is None


def test_score():
    assert score_add_sub(-667, "567 - 1234 = -(1234 - 567) = -667") is True
    assert score_add_sub(1801, "1801 = 1234 + 567") is False
