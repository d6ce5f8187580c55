"""recap proxy's read-only pages at /recap/ (issue 41, docs/report.md): the sessions, newest
first, each opening its report, reloading itself while the session runs; behind the proxy's
token when it has one."""
import http.client
import urllib.parse

from proxy_harness import KEY_A, Proxy, Standin, chat, post, tmp  # noqa: F401


def get(base, path, method="GET"):
    u = urllib.parse.urlparse(base)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    conn.request(method, (u.path or "") + path)
    r = conn.getresponse()
    body = r.read().decode("utf-8", "replace")
    conn.close()
    return r.status, dict((k.lower(), v) for k, v in r.getheaders()), body


def test_issue_41_the_proxy_lists_its_sessions_newest_first_each_with_its_report(tmp):
    up = Standin(tmp)
    config = {"limits": {"maxContextChars": 6000}, "compaction": {"keepTurns": 1}}
    proxy = Proxy(tmp, up.url, config=config)
    try:
        first = [{"role": "user", "content": "the older conversation"}]
        status, _, reply = post(proxy.url, "/v1/chat/completions", chat(first))
        assert status == 200
        messages = [{"role": "user", "content": "<script>alert('x')</script> " + "w" * 400}]
        for i in range(20):  # long enough to compact
            status, _, reply = post(proxy.url, "/v1/chat/completions", chat(messages))
            assert status == 200, reply
            messages += [reply["choices"][0]["message"],
                         {"role": "user", "content": f"step {i} " + "v" * 400}]
        status, headers, page = get(proxy.url, "/recap/")
        assert status == 200 and headers["content-type"].startswith("text/html")
        assert 'http-equiv="refresh"' in page
        links = [line for line in page.splitlines() if 'class="session"' in line]
        assert len(links) == 2
        href = links[0].split('href="')[1].split('"')[0]  # the newest: the long conversation
        status, headers, report = get(proxy.url, href)
        assert status == 200 and headers["content-type"].startswith("text/html")
        assert '<svg id="chart"' in report and 'http-equiv="refresh"' in report
        assert report.count('<g class="mark compaction"') >= 1
        assert "<script" not in report and "&lt;script&gt;" in report
        assert 'class="event' in report  # the proxy's own events, live
        assert KEY_A not in page and KEY_A not in report
        # Read-only, and nothing else is there.
        assert get(proxy.url, href, method="POST")[0] == 405
        assert get(proxy.url, "/recap/session?id=nope")[0] == 404
        assert get(proxy.url, "/recap/session?id=recap-cli.proxy-salt")[0] == 404
    finally:
        proxy.stop()
        up.stop()


def test_issue_41_with_a_token_the_pages_need_it_too(tmp):
    up = Standin(tmp)
    token = "pages-token-0123456789"
    proxy = Proxy(tmp, up.url, env={"RECAP_PROXY_TOKEN": token})
    try:
        assert get(proxy.url, "/recap/")[0] == 401
        status, _, page = get(proxy.url, "/t/" + token + "/recap/")
        assert status == 200 and "recap proxy: sessions" in page
    finally:
        proxy.stop()
        up.stop()
