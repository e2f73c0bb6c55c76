"""The web dashboard (server/web/) in a real browser.

Selenium (from PyPI) drives Debian's /usr/bin/chromium through
/usr/bin/chromedriver, headless; nothing downloads a browser. Without them
the tests are skipped. Screenshots of every view at 1280x800 and 390x844 go
to build/screenshots/.
"""

import json
import os
import pathlib
import shutil
import time

import pytest
import requests

from conftest import ROOT, Server

CHROMIUM = os.environ.get("OD_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("OD_CHROMEDRIVER", "/usr/bin/chromedriver")
SHOTS = ROOT / "build" / "screenshots"
VIEWS = ["tables", "stats", "devices", "playground", "load"]
SIZES = {"desktop": (1280, 800), "phone": (390, 844)}

# Selenium Manager must never fetch a browser or a driver.
os.environ.setdefault("SE_OFFLINE", "true")

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install selenium)")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.common.exceptions import ElementNotInteractableException, StaleElementReferenceException  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
    pytest.skip(f"no browser: {CHROMIUM} or {CHROMEDRIVER} is missing (apt install chromium chromium-driver)",
                allow_module_level=True)

ENV = {"OD_WEB_ROOT": str(ROOT / "server" / "web"), "OD_JS_CLIENT": str(ROOT / "clients" / "js" / "opdispatch.mjs")}


def make_driver():
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1280,800", "--hide-scrollbars", "--no-first-run", "--disable-extensions"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = webdriver.ChromeService(executable_path=CHROMEDRIVER)
    d = webdriver.Chrome(options=opts, service=service)
    d.set_page_load_timeout(60)
    return d


def set_size(d, name):
    w, h = SIZES[name]
    # the viewport, not the window, is what the page sees
    d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                      {"width": w, "height": h, "deviceScaleFactor": 1, "mobile": name == "phone"})


def console_errors(d, allow=()):
    out = []
    for e in d.get_log("browser"):
        if e["level"] != "SEVERE":
            continue
        if any(a in e["message"] for a in allow):
            continue
        out.append(e["message"])
    return out


def wait(d, cond, timeout=20, msg=""):
    return WebDriverWait(d, timeout, poll_frequency=0.1).until(lambda _: cond(), message=msg)


def fresh(fn, tries=10):
    """fn() again while the element it touches is replaced under it (views
    that refresh rebuild their rows: the row found may be detached by the
    time a key reaches it, which Chrome reports either way)."""
    for i in range(tries):
        try:
            return fn()
        except (StaleElementReferenceException, ElementNotInteractableException):
            if i == tries - 1:
                raise
            time.sleep(0.1)


def show(d, view):
    d.find_element(By.ID, f"tab-{view}").click()
    wait(d, lambda: d.find_element(By.ID, f"view-{view}").is_displayed(), msg=f"view {view}")


def load_page(d, url):
    d.get(url + "/")
    wait(d, lambda: d.execute_script("return document.body.dataset.ready === '1'"), 30, "the page did not start")


def shot(d, view, size):
    SHOTS.mkdir(parents=True, exist_ok=True)
    d.save_screenshot(str(SHOTS / f"{view}-{size}.png"))


@pytest.fixture(scope="module")
def dash():
    s = Server("--enable-bench", env=ENV)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def browser(dash):
    d = make_driver()
    set_size(d, "desktop")
    load_page(d, dash.url)
    yield d
    d.quit()


@pytest.fixture(autouse=True)
def no_console_errors(request):
    yield
    if "browser" in request.fixturenames:
        d = request.getfixturevalue("browser")
        errs = console_errors(d)
        assert not errs, "browser console errors:\n" + "\n".join(errs)


def expected_kind(entry):
    return "fallthrough" if entry.get("fallthrough") else entry["provenance"]


# ---- tests ---------------------------------------------------------------------


def test_index_is_the_dashboard(dash):
    r = dash.get("/", headers={"Accept": "text/html"})
    assert r.status_code == 200 and "text/html" in r.headers["Content-Type"]
    assert '/web/app.js' in r.text
    for path in ("/web/app.js", "/web/style.css", "/web/opdispatch.mjs", "/web/vendor/chart.js"):
        assert dash.get(path).status_code == 200, path


def test_matrix_lists_every_overload_with_right_cells(dash, browser):
    d = browser
    show(d, "tables")
    ops = dash.get("/v1/ops").json()
    names = [ov["name"] for o in ops["operators"] for ov in o["overloads"]]
    keys = [k["name"] for k in dash.get("/v1/keys").json()["runtime_keys"]]
    cells = d.execute_script("""
        const out = {};
        for (const tr of document.querySelectorAll('#matrix tbody tr')) {
          const row = {};
          for (const td of tr.querySelectorAll('td.cell')) row[td.dataset.key] = [td.dataset.kind, td.textContent, getComputedStyle(td).backgroundColor];
          out[tr.dataset.op] = row;
        }
        return out;""")
    assert sorted(cells) == sorted(names)
    assert len(names) == ops["count"]
    for row in cells.values():
        assert sorted(row) == sorted(keys)
    # a sample of operators, every key, against GET /v1/ops/{op}
    sample = ["aten::add.Tensor", "aten::mm", "aten::sum", "aten::softmax.int"]
    seen = set()
    for name in names:  # one of each kind too
        for k, v in cells[name].items():
            if v[0] not in seen:
                seen.add(v[0])
                sample.append(name)
    sample += names[:: max(1, len(names) // 8)]
    letters, colours = {}, {}
    for name in dict.fromkeys(n for n in sample if n in cells):
        detail = dash.get(f"/v1/ops/{name}").json()
        for e in detail["table"]:
            kind, letter, colour = cells[name][e["key"]]
            assert kind == expected_kind(e), (name, e)
            assert letters.setdefault(kind, letter) == letter and letter.strip()
            colours.setdefault(kind, colour)
    assert {"kernel", "autograd kernel", "backend fallback", "fallthrough", "missing"} <= set(letters)
    assert len(set(letters.values())) == len(letters), letters   # one letter per kind
    assert len(set(colours.values())) == len(colours), colours   # one colour per kind
    legend = d.find_element(By.ID, "legend").text
    for k in ("kernel", "default backend kernel", "math kernel", "autograd kernel", "backend fallback", "fallthrough", "missing"):
        assert k in legend
    # alias-key registrations are shown
    alias = d.execute_script("return document.querySelector('#matrix tr[data-op=\"aten::add.Tensor\"] td.alias').textContent")
    assert "Autograd" in alias

    # filters: name, namespace, key
    f = d.find_element(By.ID, "f-name")
    f.send_keys("softmax")
    wait(d, lambda: 0 < len(d.find_elements(By.CSS_SELECTOR, "#matrix tbody tr")) < len(names))
    assert all("softmax" in tr.get_attribute("data-op") for tr in d.find_elements(By.CSS_SELECTOR, "#matrix tbody tr"))
    f.send_keys(Keys.CONTROL, "a")
    f.send_keys(Keys.DELETE)
    Select(d.find_element(By.ID, "f-key")).select_by_value("CPU")
    wait(d, lambda: d.execute_script("return document.querySelectorAll('#matrix thead th').length") == 3)
    Select(d.find_element(By.ID, "f-ns")).select_by_value("od")
    rows = d.find_elements(By.CSS_SELECTOR, "#matrix tbody tr")
    assert rows and all(tr.get_attribute("data-op").startswith("od::") for tr in rows)
    Select(d.find_element(By.ID, "f-ns")).select_by_value("")
    Select(d.find_element(By.ID, "f-key")).select_by_value("")
    wait(d, lambda: len(d.find_elements(By.CSS_SELECTOR, "#matrix tbody tr")) == len(names))
    for size in SIZES:
        set_size(d, size)
        time.sleep(0.3)
        shot(d, "tables", size)
    set_size(d, "desktop")


def test_operator_detail_and_dumps(dash, browser):
    d = browser
    show(d, "tables")
    btn = d.find_element(By.CSS_SELECTOR, '#matrix tr[data-op="aten::add.Tensor"] button.op-link')
    d.execute_script("arguments[0].scrollIntoView()", btn)
    btn.send_keys(Keys.ENTER)   # keyboard activation
    wait(d, lambda: "kernels/" in d.find_element(By.ID, "dump-table").text, msg="dumps")
    detail = dash.get("/v1/ops/add.Tensor").json()
    assert d.find_element(By.ID, "detail-schema").text == detail["schema"]
    table = d.find_element(By.ID, "detail-table").text
    for e in detail["table"]:
        assert e["key"] in table
        if e.get("registered_at"):
            assert e["registered_at"] in table
    regs = d.find_element(By.ID, "detail-regs").text
    assert "Autograd [alias]" in regs and "od_cpu_binary" in regs
    dumps = dash.get("/v1/ops/add.Tensor?format=text").text
    t1 = d.find_element(By.ID, "dump-table").text
    t2 = d.find_element(By.ID, "dump-regs").text
    assert t1.startswith("# computed dispatch table") and "CPU: registered at" in t1
    assert t2.startswith("# registrations") and "name: aten::add.Tensor" in t2
    assert t1.split() + t2.split() == dumps.split()
    copy = d.find_element(By.CSS_SELECTOR, 'button.copy[data-copy="dump-table"]')
    copy.click()
    wait(d, lambda: copy.text in ("Copied", "Copy failed"))
    for size in SIZES:
        set_size(d, size)
        time.sleep(0.3)
        d.execute_script("document.getElementById('detail').scrollIntoView()")
        shot(d, "tables-detail", size)
    set_size(d, "desktop")
    d.find_element(By.ID, "detail-close").send_keys(Keys.ENTER)
    wait(d, lambda: not d.find_element(By.ID, "detail").is_displayed(), msg="detail closed")


def _arg(d, name):
    return d.find_element(By.CSS_SELECTOR, f'#pg-args .arg[data-name="{name}"]')


def test_playground_add_and_statistics(dash, browser):
    d = browser
    show(d, "playground")
    Select(d.find_element(By.ID, "pg-op")).select_by_value("add.Tensor")
    wait(d, lambda: len(d.find_elements(By.CSS_SELECTOR, '#pg-args .arg[data-name="alpha"]')) == 1)
    for name, vals in (("self", "1,2,3,4"), ("other", "10,20,30,40")):
        a = _arg(d, name)
        a.find_element(By.CSS_SELECTOR, ".shape").clear()
        a.find_element(By.CSS_SELECTOR, ".shape").send_keys("2,2")
        Select(a.find_element(By.CSS_SELECTOR, ".gen")).select_by_value("values")
        a.find_element(By.CSS_SELECTOR, ".values").send_keys(vals)
    alpha = _arg(d, "alpha")
    alpha.find_element(By.CSS_SELECTOR, ".use").click()
    alpha.find_element(By.CSS_SELECTOR, ".val").clear()
    alpha.find_element(By.CSS_SELECTOR, ".val").send_keys("2")
    d.find_element(By.ID, "pg-run").click()
    wait(d, lambda: d.find_elements(By.CSS_SELECTOR, "#pg-outputs .out-table td"), msg="outputs")
    vals = [td.text for td in d.find_elements(By.CSS_SELECTOR, "#pg-outputs .out-table td")]
    assert [float(v) for v in vals] == [21, 42, 63, 84]
    steps = d.execute_script("return [...document.querySelectorAll('#pg-path li.step-li')].map(l => [l.dataset.key, l.dataset.kernel, l.dataset.provenance])")
    assert steps == [["CPU", "od_cpu_binary", "kernel"]]
    curl = d.find_element(By.ID, "pg-curl").text
    assert "/v1/ops/add.Tensor" in curl and '"alpha":2' in curl
    py = d.find_element(By.ID, "pg-python").text
    assert "from opdispatch import Client" in py and 'c.call("add.Tensor", self, other, alpha=2)' in py
    # the curl command is right: run its body through the API
    body = json.loads(curl.split("-d '", 1)[1].rsplit("'", 1)[0])
    r = dash.post("/v1/ops/add.Tensor", body).json()
    assert r["outputs"][0]["data"] == [21.0, 42.0, 63.0, 84.0]

    # autograd + trace: the path goes through AutogradCPU
    _arg(d, "self").find_element(By.CSS_SELECTOR, ".rg").click()
    d.find_element(By.ID, "pg-mode-trace").click()
    d.find_element(By.ID, "pg-run").click()
    wait(d, lambda: d.execute_script("return document.querySelectorAll('#pg-path li.step-li').length") == 3, msg="3 steps")
    keys = d.execute_script("return [...document.querySelectorAll('#pg-path li.step-li')].map(l => l.dataset.key)")
    assert keys == ["Mode", "AutogradCPU", "CPU"]
    assert "events" in d.find_element(By.ID, "pg-modes").get_attribute("textContent")
    _arg(d, "self").find_element(By.CSS_SELECTOR, ".rg").click()
    d.find_element(By.ID, "pg-mode-trace").click()

    # a large output: summary and a histogram
    Select(d.find_element(By.ID, "pg-op")).select_by_value("relu")
    wait(d, lambda: len(d.find_elements(By.CSS_SELECTOR, '#pg-args .arg[data-name="self"]')) == 1)
    a = _arg(d, "self")
    a.find_element(By.CSS_SELECTOR, ".shape").clear()
    a.find_element(By.CSS_SELECTOR, ".shape").send_keys("50,40")
    Select(a.find_element(By.CSS_SELECTOR, ".gen")).select_by_value("randn")
    d.find_element(By.ID, "pg-run").click()
    wait(d, lambda: d.find_elements(By.CSS_SELECTOR, "#pg-outputs .st-mean"), msg="summary")
    assert float(d.find_element(By.CSS_SELECTOR, "#pg-outputs .st-min").text) >= 0
    assert d.find_elements(By.CSS_SELECTOR, "#pg-outputs .hist canvas")
    assert d.execute_script("return !!Chart.getChart(document.querySelector('#pg-outputs .hist canvas'))")
    for size in SIZES:
        set_size(d, size)
        time.sleep(0.3)
        shot(d, "playground", size)
    set_size(d, "desktop")

    # the statistics view shows the calls
    show(d, "stats")
    wait(d, lambda: d.find_elements(By.CSS_SELECTOR, '#top-ops tr[data-op="aten::add.Tensor"]'), msg="stats row")
    # the table is rebuilt every refresh: read it in one script, not through a stale element; the view
    # may first show the last poll's counts, taken before the later adds (it polls every 1.5 s)
    calls = lambda: int(d.execute_script("return document.querySelector('#top-ops tr[data-op=\"aten::add.Tensor\"]')"
                                         ".querySelectorAll('td')[1].textContent"))
    wait(d, lambda: calls() >= 2, msg="add.Tensor's calls counted")
    assert d.execute_script("return !!Chart.getChart(document.getElementById('chart-rps')) && !!Chart.getChart(document.getElementById('chart-lat'))")
    fresh(lambda: d.find_element(By.CSS_SELECTOR, '#top-ops tr[data-op="aten::add.Tensor"]').send_keys(Keys.ENTER))
    wait(d, lambda: "AutogradCPU" in d.find_element(By.ID, "key-split").text, msg="key split")
    # sortable: by operator name
    d.find_element(By.CSS_SELECTOR, '#top-ops th button[data-col="op"]').click()
    ops = d.execute_script("return [...document.querySelectorAll('#top-ops tbody tr')].map(t => t.dataset.op)")
    assert ops == sorted(ops) or ops == sorted(ops, reverse=True)
    # the refresh keeps the header and the focused row: a keyboard user stays put
    fresh(lambda: d.execute_script("document.querySelector('#top-ops tr[data-op=\"aten::add.Tensor\"]').focus()"))
    hdr = d.find_element(By.CSS_SELECTOR, '#top-ops th button[data-col="op"]')
    time.sleep(2)   # a few samples in the charts, and at least one refresh
    assert hdr.is_displayed()   # the same element: it raises if rebuilt
    assert d.execute_script("return document.activeElement.dataset.op") == "aten::add.Tensor"
    for size in SIZES:
        set_size(d, size)
        time.sleep(0.5)
        shot(d, "stats", size)
    set_size(d, "desktop")


def _values(d, op, **shapes_vals):
    Select(d.find_element(By.ID, "pg-op")).select_by_value(op)
    first = next(iter(shapes_vals))
    wait(d, lambda: len(d.find_elements(By.CSS_SELECTOR, f'#pg-args .arg[data-name="{first}"]')) == 1)
    for name, (shape, vals) in shapes_vals.items():
        a = _arg(d, name)
        a.find_element(By.CSS_SELECTOR, ".shape").clear()
        a.find_element(By.CSS_SELECTOR, ".shape").send_keys(shape)
        Select(a.find_element(By.CSS_SELECTOR, ".gen")).select_by_value("values")
        a.find_element(By.CSS_SELECTOR, ".values").clear()
        a.find_element(By.CSS_SELECTOR, ".values").send_keys(vals)


def _run(d):
    d.execute_script("document.getElementById('pg-outputs').replaceChildren()")
    d.find_element(By.ID, "pg-run").click()
    wait(d, lambda: d.find_elements(By.CSS_SELECTOR, "#pg-outputs .out-table td")
         or d.find_element(By.ID, "pg-error").is_displayed(), msg="outputs")
    assert not d.find_element(By.ID, "pg-error").is_displayed(), d.find_element(By.ID, "pg-error").text
    return [float(td.text) for td in d.find_elements(By.CSS_SELECTOR, "#pg-outputs .out-table td")]


def test_playground_vmap_and_override(dash, browser):
    d = browser
    show(d, "playground")
    x = [-1, 2, -3, 4, 5, -6]
    _values(d, "relu", self=("2,3", ",".join(map(str, x))))
    d.find_element(By.ID, "pg-vmap").click()
    for field, text in (("pg-indims", "0"), ("pg-outdims", "1")):
        d.find_element(By.ID, field).clear()
        d.find_element(By.ID, field).send_keys(text)
    Select(d.find_element(By.ID, "pg-randomness")).select_by_value("same")
    got = _run(d)
    # out_dims=1: the batch of 2 moves to the last dim, so the [3, 2] result is relu(x).T
    want = [max(x[b * 3 + j], 0) for j in range(3) for b in range(2)]
    assert got == want
    assert "[3, 2]" in d.find_element(By.CSS_SELECTOR, "#pg-outputs h4").text
    keys = d.execute_script("return [...document.querySelectorAll('#pg-path li.step-li')].map(l => l.dataset.key)")
    assert keys[0] == "Batched" and keys[-1] == "CPU", keys
    py = d.find_element(By.ID, "pg-python").text
    assert 'c.vmap("relu", in_dims=0, out_dims=1, randomness="same")(self)' in py
    curl = d.find_element(By.ID, "pg-curl").text
    body = json.loads(curl.split("-d '", 1)[1].rsplit("'", 1)[0])
    assert body["vmap"] == {"in_dims": 0, "out_dims": 1, "randomness": "same"}
    r = dash.post("/v1/ops/relu", body).json()
    assert r["outputs"][0]["shape"] == [3, 2] and r["outputs"][0]["data"] == want
    d.find_element(By.ID, "pg-vmap").click()

    # override: mm served by mm_reference; the mode reports the replaced call
    _values(d, "mm", self=("2,2", "1,2,3,4"), mat2=("2,2", "5,6,7,8"))
    d.find_element(By.ID, "pg-override").send_keys("mm=mm_reference")
    assert _run(d) == [19, 22, 43, 50]
    rep = json.loads(d.find_element(By.ID, "pg-modes").get_attribute("textContent"))
    assert rep["override"]["replaced_calls"] == 1 and rep["override"]["map"] == {"aten::mm": "od::mm_reference"}, rep
    assert 'c.modes([{"override":{"mm":"mm_reference"}}])' in d.find_element(By.ID, "pg-python").text
    # a malformed override is refused in the page, before any request
    d.find_element(By.ID, "pg-override").clear()
    d.find_element(By.ID, "pg-override").send_keys("mm")
    d.find_element(By.ID, "pg-run").click()
    wait(d, lambda: d.find_element(By.ID, "pg-error").is_displayed(), msg="override error")
    assert "op=replacement" in d.find_element(By.ID, "pg-error").text
    d.find_element(By.ID, "pg-override").clear()
    assert not console_errors(d)


def test_devices(dash, browser):
    d = browser
    show(d, "devices")
    wait(d, lambda: "cores" in d.find_element(By.ID, "devices").text, msg="devices")
    dev = dash.get("/v1/devices").json()
    text = d.find_element(By.ID, "devices").text
    assert str(dev["cpu"]["cores"]) in text and "BLAS" in text
    if not dev["cuda"]["available"]:
        assert dev["cuda"]["reason"] in text
    for g in dev["cuda"]["devices"]:
        assert g["name"] in text and "allocator in use" in text and "utilisation" in text
    assert "undefined" not in text and "NaN" not in text
    for size in SIZES:
        set_size(d, size)
        time.sleep(0.3)
        shot(d, "devices", size)
    set_size(d, "desktop")


def test_load_panel_starts_and_stops(dash, browser):
    d = browser
    if dash.get("/v1/load").status_code == 404:
        pytest.skip("this server has no /v1/load")
    show(d, "load")
    Select(d.find_element(By.ID, "load-op")).select_by_value("mm")
    sh = d.find_element(By.ID, "load-shape")
    sh.clear()
    sh.send_keys("32,32")
    amt = d.find_element(By.ID, "load-amount")
    amt.clear()
    amt.send_keys("60")
    d.find_element(By.ID, "load-start").click()
    try:
        _watch_and_stop_load(d, dash)
    finally:
        dash.delete("/v1/load")  # never outlives the test, whatever the browser did


def _watch_and_stop_load(d, dash):
    wait(d, lambda: d.find_element(By.ID, "load-state").get_attribute("data-state") == "running", 15, "running")
    wait(d, lambda: d.execute_script("return Chart.getChart(document.getElementById('chart-load')).data.labels.length") >= 2, 20, "series")
    st = dash.get("/v1/load").json()
    assert st["state"] == "running" and st["requests"] > 0
    for size in SIZES:
        set_size(d, size)
        time.sleep(0.3)
        shot(d, "load", size)
    set_size(d, "desktop")
    d.find_element(By.ID, "load-stop").click()
    wait(d, lambda: d.find_element(By.ID, "load-state").get_attribute("data-state") in ("stopped", "done"), 15, "stopped")
    assert dash.get("/v1/load").json()["state"] in ("stopped", "done")


def test_no_polling_while_hidden(browser):
    d = browser
    show(d, "stats")
    d.execute_script("performance.setResourceTimingBufferSize(100000); performance.clearResourceTimings();")
    time.sleep(2)
    assert d.execute_script("return performance.getEntriesByType('resource').length") > 0
    d.execute_script("""
        Object.defineProperty(document, 'hidden', {configurable: true, get: () => true});
        Object.defineProperty(document, 'visibilityState', {configurable: true, get: () => 'hidden'});
        document.dispatchEvent(new Event('visibilitychange'));""")
    time.sleep(0.5)
    n0 = d.execute_script("return performance.getEntriesByType('resource').length")
    time.sleep(4)
    assert d.execute_script("return performance.getEntriesByType('resource').length") == n0
    d.execute_script("""
        delete document.hidden; delete document.visibilityState;
        document.dispatchEvent(new Event('visibilitychange'));""")
    time.sleep(2)
    assert d.execute_script("return performance.getEntriesByType('resource').length") > n0


def test_keyboard_tabs(browser):
    d = browser
    show(d, "tables")
    t = d.find_element(By.ID, "tab-tables")
    t.send_keys(Keys.ARROW_RIGHT)
    wait(d, lambda: d.find_element(By.ID, "tab-stats").get_attribute("aria-selected") == "true")
    assert d.switch_to.active_element.get_attribute("id") == "tab-stats"
    d.find_element(By.ID, "tab-devices").send_keys(Keys.ENTER)
    wait(d, lambda: d.find_element(By.ID, "view-devices").is_displayed())


def test_phone_width_has_no_page_overflow(browser):
    d = browser
    set_size(d, "phone")
    try:
        for v in VIEWS:
            show(d, v)
            time.sleep(0.2)
            w = d.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
            assert w[0] <= w[1] + 1, (v, w)
    finally:
        set_size(d, "desktop")


def test_load_forbidden_without_enable_bench(make_server):
    s = make_server(env=ENV)
    d = make_driver()
    try:
        set_size(d, "desktop")
        load_page(d, s.url)
        show(d, "load")
        d.find_element(By.ID, "load-start").click()   # GET /v1/load answers everywhere; POST is refused
        box = d.find_element(By.ID, "load-forbidden")
        wait(d, lambda: box.is_displayed(), msg="403 reason")
        assert "403" in box.text and "--enable-bench" in box.text
        assert not d.find_element(By.ID, "load-start").is_enabled()
        shot(d, "load-forbidden", "desktop")
        # the 403 itself is logged by the browser as a failed resource; nothing else
        errs = console_errors(d, allow=("/v1/load - Failed to load resource: the server responded with a status of 403",))
        assert not errs, errs
    finally:
        d.quit()
