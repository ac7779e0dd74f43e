"""040 的可见测试。"""

from solution import StopMatcher


def test_example_answer_tag():
    m = StopMatcher(["</answer>", "###"])
    assert m.feed("42") == ("42", False)
    assert m.feed("</") == ("", False)
    assert m.feed("ans") == ("", False)
    assert m.feed("wer>后面的不要了") == ("", True)
    assert m.feed("更多") == ("", True)


def test_example_minimal_holdback():
    m = StopMatcher(["###"])
    assert m.feed("a#") == ("a", False)
    assert m.feed("#b") == ("##b", False)
    assert m.flush() == ""


def test_no_stops_passes_through():
    m = StopMatcher([])
    assert m.feed("abc") == ("abc", False)
    assert m.flush() == ""
