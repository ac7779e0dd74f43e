"""练习 003：名字 → 实现的通用注册表。"""

from __future__ import annotations


class Registry:
    """一张“名字 → 对象”的表。

    - register(name) 返回装饰器：登记被装饰的对象并原样返回；重复的名字抛 ValueError；
    - get(name) 取出对象；未知名字抛 ValueError，信息里列出所有已登记名字（字母序，", " 连接）；
    - names() 返回排好序的名字列表；name in registry 判断是否登记过。
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def register(self, name: str):
        raise NotImplementedError("在这里实现 register")

    def get(self, name: str):
        raise NotImplementedError("在这里实现 get")

    def names(self) -> list[str]:
        raise NotImplementedError("在这里实现 names")

    def __contains__(self, name: object) -> bool:
        raise NotImplementedError("在这里实现 __contains__")
