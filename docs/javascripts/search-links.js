// 搜索结果里每一页的第一条链接指向这一页本身。词只出现在后面某一节里时，主题给它的是空的
// ?h=：点开落在页首，什么也不高亮。把它换成同一组里第一条命中的小节（带锚点和 ?h=）。
(function () {
  function fix(list) {
    for (const item of list.querySelectorAll(".md-search-result__item")) {
      const links = item.querySelectorAll("a.md-search-result__link");
      if (links.length < 2) continue;
      const page = new URL(links[0].href);
      if (page.searchParams.get("h")) continue;
      const section = Array.from(links).slice(1).find((a) => new URL(a.href).searchParams.get("h"));
      if (section) links[0].href = section.href;
    }
  }
  function watch() {
    const list = document.querySelector(".md-search-result__list");
    if (!list) return;
    new MutationObserver(() => fix(list)).observe(list, { childList: true, subtree: true });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", watch);
  else watch();
})();
