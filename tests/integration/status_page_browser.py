#!/usr/bin/python3
"""Drives Debian's chromium (headless, through chromedriver) against ddprun's status page.

    status_page_browser.py URL JOB_DIR SCREENSHOT

The job's workers run in `crash-until 2` mode with JOB_DIR/pause.0 and pause.1 (see
test_worker.cc): rank 1 crashes when JOB_DIR/go.0 appears. The page is opened while the first
node waits for the second: it must say that no round has begun and why it waits; then
JOB_DIR/seen.gathering is written (the test starts the second node). It must show round 0,
then, without a reload, round 1, the failure, and in the rounds table where round 1's
restart went. Prints what it saw (how long after the
crash: bench/observability.py measures that figure); exits non-zero on any failure. Writes a
screenshot of the page after the failure to SCREENSHOT.
"""
import os
import re
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By


def text(driver, element_id):
    return driver.find_element(By.ID, element_id).text


def wait_for(driver, what, condition, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return time.monotonic()
        time.sleep(0.02)
    raise SystemExit(f"the page did not show {what} within {seconds} s; it shows: "
                     f"state={text(driver, 'state')!r} round={text(driver, 'round')!r} "
                     f"failure={text(driver, 'failure')!r} error={text(driver, 'error')!r}")


def main():
    url, job_dir, screenshot = sys.argv[1:4]
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1000"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        driver.get(url)
        wait_for(driver, "no round yet, and why it waits",
                 lambda: text(driver, "round") == "none yet"
                 and "1 joined" in text(driver, "waiting"), 60)
        with open(os.path.join(job_dir, "seen.gathering"), "w"):
            pass
        wait_for(driver, "round 0 running",
                 lambda: text(driver, "round") == "0" and text(driver, "state") == "running", 60)
        # A mark only this page load has: a reload would lose it.
        driver.execute_script("window.ddprunTestMark = 42;")
        with open(os.path.join(job_dir, "go.0"), "w"):
            pass
        crashed = time.monotonic()
        shown = wait_for(driver, "round 1 and the failure of rank 1",
                         lambda: text(driver, "round") == "1"
                         and "rank 1 (local rank 1)" in text(driver, "failure"), 30)
        if driver.execute_script("return window.ddprunTestMark;") != 42:
            raise SystemExit("the page was reloaded")
        grid = driver.find_elements(By.CSS_SELECTOR, "#grid .cell")
        if len(grid) != 4:
            raise SystemExit(f"the grid shows {len(grid)} ranks, not 4")
        marked = [c.text for c in driver.find_elements(By.CSS_SELECTOR, "#grid .failed-rank")]
        if marked != ["1"]:
            raise SystemExit(f"the grid marks ranks {marked} as failed, not rank 1")
        rounds = driver.find_elements(By.CSS_SELECTOR, "#rounds tbody tr")
        # Round 1's restart, part by part, once its nodes have said (column 6: restarted in).
        split = lambda: driver.find_element(
            By.CSS_SELECTOR, '#rounds tbody tr[data-round="1"] td:nth-child(6)').text
        wait_for(driver, "round 1's restart split", lambda: re.fullmatch(
            r"\d+ ms: (detection \d+, )?stop \d+, rendezvous \d+, spawn \d+", split()), 10)
        # Column 7, master away: none of its nodes lost the master in this job.
        away = driver.find_element(
            By.CSS_SELECTOR, '#rounds tbody tr[data-round="1"] td:nth-child(7)').text
        if away != "-":
            raise SystemExit(f"round 1's master-away column reads {away!r}, not '-'")
        failure = text(driver, "failure")
        if "fails on purpose" not in failure:
            raise SystemExit(f"the failure report lacks the worker's stderr: {failure!r}")
        print(f"shown {shown - crashed:.3f} s after the crash; {len(rounds)} rounds listed; "
              f"failure: {failure.splitlines()[0]}")
        for entry in driver.get_log("browser"):
            if entry.get("level") == "SEVERE":
                raise SystemExit(f"the page logged an error: {entry}")
        driver.save_screenshot(screenshot)
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
