"""Converters from public app-usage datasets to appflow traces
(docs/python.md "Real traces").

The datasets cannot be redistributed; point these at your own download.

* :func:`lsapp` — LSApp (Aliannejadi et al., TOIS 2021), ``lsapp.tsv``:
  tab-separated ``user_id, session_id, timestamp, app_name, event_type``,
  timestamps ``2018-01-16 06:01:05``, events ``Opened`` / ``Closed`` /
  ``User Interaction``. Opened → open, Closed → close, User Interaction
  rows are dropped (the app is already in front).
* :func:`studentlife` — StudentLife (Wang et al., UbiComp 2014),
  ``app_usage/running_app_uXX.csv``: snapshots of the running tasks with
  ``timestamp`` (Unix seconds) and ``RUNNING_TASKS_topActivity_mPackage``
  among other columns. The first row of each snapshot is the foreground
  task (Android lists running tasks most recent first). An open is emitted
  when the foreground package changes; a launcher package in front is the
  home screen (close). The user id is the file's ``uXX``.
* :func:`generic_csv` — any CSV/TSV with a user, a time and an app column
  (and optionally an event column), named by the caller.

Real app names map to the catalogue through :data:`APP_MAP` (display
names, as in LSApp) and :data:`PACKAGE_MAP` (Android packages, as in
StudentLife); your own ``app_map`` entries win. An app with a counterpart in
the catalogue becomes that app; only apps known to be GB-scale (large
games, on-device LLMs, the AppFlow paper's Table 1 apps) map to GB-scale
apps. An app with **no counterpart** (``unmapped=``):

* ``"tail"`` (default): becomes one of the catalogue's 45 everyday tail
  apps, chosen by a stable hash of its name (the same real app is always
  the same stand-in). It is never made GB-scale: a small game stays small.
  Its launch still sends the previous app to the background, as on the phone.
* ``"drop"``: its rows are removed (the app before it stays in front).
* ``"error"``: ``ValueError`` naming the first unmapped apps.
"""
from __future__ import annotations

import hashlib
import os
import re
from typing import Mapping, Optional, Sequence, Union

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from . import Trace, catalogue

PathLike = Union[str, os.PathLike]

#: Display names (LSApp, Play Store titles) → catalogue apps.
APP_MAP: dict[str, str] = {
    # GB-scale (the AppFlow paper Table 1 and §6.2, and games of that size)
    "TikTok": "TikTok",
    "TikTok Lite": "TikTok",
    "Snow": "Snow",
    "PUBG MOBILE": "PUBG",
    "PUBG Mobile": "PUBG",
    "Roblox": "Roblox",
    "Adobe Photoshop Express": "Photoshop",
    "Photoshop Express": "Photoshop",
    "Xiaohongshu": "RedNote",
    "RedNote": "RedNote",
    "Gemma": "Gemma",
    "Qwen": "Qwen2.5",
    # Low-memory apps of §6.1 and everyday apps
    "ChatGPT": "ChatGPT",
    "Instagram": "Instagram",
    "Zoom": "Zoom",
    "ZOOM Cloud Meetings": "Zoom",
    "WhatsApp Messenger": "WhatsApp",
    "WhatsApp": "WhatsApp",
    "Facebook": "Facebook",
    "Facebook Messenger": "Messages",
    "Messenger": "Messages",
    "Twitter": "X",
    "X": "X",
    "YouTube": "YouTube",
    "Spotify": "Spotify",
    "Spotify Music": "Spotify",
    "Gmail": "Gmail",
    "Google Chrome": "Chrome",
    "Chrome": "Chrome",
    "Google Maps": "Maps",
    "Maps": "Maps",
    "Telegram": "Telegram",
    "LINE": "Line",
    "WeChat": "WeChat",
    "Camera": "Camera",
    "Google Camera": "Camera",
    "Calculator": "Calculator",
    "Calendar": "Calendar",
    "Google Calendar": "Calendar",
    "Clock": "Clock",
    "Contacts": "Contacts",
    "Phone": "Phone",
    "Messages": "Messages",
    "Messaging": "Messages",
    "Photos": "Photos",
    "Google Photos": "Photos",
    "Gallery": "Photos",
    "Files": "Files",
    "Settings": "Settings",
    "Google Keep": "Notes",
    "Weather": "Weather",
    "Google Translate": "Translate",
    "Google Drive": "Drive",
    "Google Docs": "Docs",
    "Google Sheets": "Sheets",
    "Slack": "Slack",
    "Microsoft Teams": "Teams",
    "Microsoft Outlook": "Outlook",
    "Outlook": "Outlook",
    "LinkedIn": "LinkedIn",
    "Reddit": "Reddit",
    "Pinterest": "Pinterest",
    "Snapchat": "Snapchat",
    "Discord": "Discord",
    "Twitch": "Twitch",
    "Netflix": "Netflix",
    "Amazon Prime Video": "PrimeVideo",
    "Disney+": "DisneyPlus",
    "Uber": "Uber",
    "Lyft": "Lyft",
    "Airbnb": "Airbnb",
    "Booking.com": "Booking",
    "Amazon Shopping": "Amazon",
    "eBay": "eBay",
    "PayPal": "PayPal",
    "Duolingo": "Duolingo",
    "Amazon Kindle": "Kindle",
    "Kindle": "Kindle",
    "Audible": "Audible",
    "Google Podcasts": "Podcasts",
    "Strava": "Strava",
    "Fitbit": "Fitbit",
    "Shazam": "Shazam",
    "Waze": "Waze",
    "CapCut": "CapCut",
    "Lightroom": "Lightroom",
}

#: Android packages (StudentLife, usage-stats logs) → catalogue apps.
PACKAGE_MAP: dict[str, str] = {
    "com.zhiliaoapp.musically": "TikTok",
    "com.ss.android.ugc.trill": "TikTok",
    "com.campmobile.snow": "Snow",
    "com.tencent.ig": "PUBG",
    "com.roblox.client": "Roblox",
    "com.adobe.psmobile": "Photoshop",
    "com.xingin.xhs": "RedNote",
    "com.openai.chatgpt": "ChatGPT",
    "com.instagram.android": "Instagram",
    "us.zoom.videomeetings": "Zoom",
    "com.whatsapp": "WhatsApp",
    "com.facebook.katana": "Facebook",
    "com.facebook.orca": "Messages",
    "com.twitter.android": "X",
    "com.google.android.youtube": "YouTube",
    "com.spotify.music": "Spotify",
    "com.google.android.gm": "Gmail",
    "com.android.chrome": "Chrome",
    "com.android.browser": "Chrome",
    "com.google.android.apps.maps": "Maps",
    "org.telegram.messenger": "Telegram",
    "jp.naver.line.android": "Line",
    "com.tencent.mm": "WeChat",
    "com.android.camera": "Camera",
    "com.google.android.GoogleCamera": "Camera",
    "com.android.calculator2": "Calculator",
    "com.google.android.calendar": "Calendar",
    "com.android.calendar": "Calendar",
    "com.android.deskclock": "Clock",
    "com.android.contacts": "Contacts",
    "com.android.phone": "Phone",
    "com.android.dialer": "Phone",
    "com.android.mms": "Messages",
    "com.google.android.talk": "Messages",
    "com.google.android.apps.photos": "Photos",
    "com.android.gallery3d": "Photos",
    "com.android.settings": "Settings",
    "com.google.android.keep": "Notes",
    "com.evernote": "Notes",
    "com.google.android.apps.translate": "Translate",
    "com.google.android.apps.docs": "Drive",
    "com.Slack": "Slack",
    "com.microsoft.office.outlook": "Outlook",
    "com.linkedin.android": "LinkedIn",
    "com.reddit.frontpage": "Reddit",
    "com.pinterest": "Pinterest",
    "com.snapchat.android": "Snapchat",
    "com.discord": "Discord",
    "tv.twitch.android.app": "Twitch",
    "com.netflix.mediaclient": "Netflix",
    "com.ubercab": "Uber",
    "me.lyft.android": "Lyft",
    "com.amazon.mShop.android.shopping": "Amazon",
    "com.ebay.mobile": "eBay",
    "com.paypal.android.p2pmobile": "PayPal",
    "com.duolingo": "Duolingo",
    "com.amazon.kindle": "Kindle",
    "com.shazam.android": "Shazam",
    "com.waze": "Waze",
}

UNMAPPED = ("tail", "drop", "error")


def _tail_apps() -> list[str]:
    cat = catalogue()
    return [n for n, c in zip(cat.column("name").to_pylist(), cat.column("class").to_pylist()) if c == "tail"]


def _map_apps(
    apps: pa.ChunkedArray, base: Mapping[str, str], app_map: Optional[Mapping[str, str]], unmapped: str, source: str
) -> pa.Array:
    """Maps real app names to catalogue names (null: dropped)."""
    if unmapped not in UNMAPPED:
        raise ValueError(f"unmapped={unmapped!r}; valid: {', '.join(UNMAPPED)}")
    names = set(catalogue().column("name").to_pylist())
    table = dict(base)
    for k, v in (app_map or {}).items():
        if v not in names:
            raise ValueError(f"app_map: {k!r} -> {v!r}: unknown app {v!r}; valid apps: {', '.join(sorted(names))}")
        table[k] = v
    tail = _tail_apps()
    enc = pc.dictionary_encode(apps.combine_chunks() if isinstance(apps, pa.ChunkedArray) else apps)
    uniq = enc.dictionary.to_pylist()
    out, missing = [], []
    for u in uniq:
        m = table.get(u) if u is not None else None
        if m is None and u in names:
            m = u  # already a catalogue name
        if m is None:
            missing.append(u)
            if unmapped == "tail":
                h = int.from_bytes(hashlib.sha256(str(u).encode()).digest()[:8], "big")
                m = tail[h % len(tail)]
        out.append(m)
    if missing and unmapped == "error":
        shown = ", ".join(repr(m) for m in missing[:5])
        raise ValueError(f"{source}: {len(missing)} apps have no counterpart in the catalogue (app_map), e.g. {shown}")
    return pc.take(pa.array(out, pa.string()), enc.indices)


def _read(path: PathLike, delimiter: str, source: str, need: Sequence[str], what: str) -> pa.Table:
    try:
        t = pacsv.read_csv(
            os.fspath(path),
            parse_options=pacsv.ParseOptions(delimiter=delimiter),
            convert_options=pacsv.ConvertOptions(strings_can_be_null=False),
        )
    except FileNotFoundError:
        raise ValueError(f"{source}: cannot read: no such file") from None
    except (pa.ArrowInvalid, OSError) as e:
        raise ValueError(f"{source}: not {what}: {e}") from None
    missing = [c for c in need if c not in t.column_names]
    if missing:
        raise ValueError(
            f"{source}: not {what}: no column {missing[0]!r} (found: {', '.join(t.column_names)})"
        )
    return t


def _finish(user, ts_ms, app, event, source: str) -> Trace:
    t = pa.table({"user": user, "timestamp": ts_ms, "app": app, "event": event})
    t = t.filter(pc.is_valid(t.column("app")))
    if t.num_rows == 0:
        raise ValueError(f"{source}: no events left after mapping the apps")
    # Stable: same-time rows keep their file order.
    t = t.sort_by([("user", "ascending"), ("timestamp", "ascending")])
    return Trace.from_arrow(t, source)


def lsapp(
    path: PathLike, app_map: Optional[Mapping[str, str]] = None, unmapped: str = "tail"
) -> Trace:
    """Converts LSApp's ``lsapp.tsv`` (docs/python.md)."""
    source = os.fspath(path)
    t = _read(path, "\t", source, ("user_id", "timestamp", "app_name", "event_type"), "an LSApp TSV")
    ev = t.column("event_type").cast(pa.string())
    bad = pc.invert(pc.is_in(ev, pa.array(["Opened", "Closed", "User Interaction"])))
    if pc.any(bad).as_py():
        first = pc.filter(ev, bad)[0].as_py()
        raise ValueError(
            f"{source}: not an LSApp TSV: event_type {first!r} (LSApp has Opened, Closed, User Interaction)"
        )
    t = t.filter(pc.not_equal(ev, "User Interaction"))
    ts = t.column("timestamp")
    if not pa.types.is_timestamp(ts.type):
        try:
            ts = pc.strptime(ts.cast(pa.string()), format="%Y-%m-%d %H:%M:%S", unit="s")
        except pa.ArrowInvalid as e:
            raise ValueError(f"{source}: not an LSApp TSV: timestamp: {e}") from None
    ts_ms = pc.multiply(ts.cast(pa.timestamp("s")).cast(pa.int64()), 1000)
    event = pc.if_else(pc.equal(t.column("event_type"), "Opened"), "open", "close")
    app = _map_apps(t.column("app_name").cast(pa.string()), APP_MAP, app_map, unmapped, source)
    return _finish(t.column("user_id").cast(pa.string()), ts_ms, app, event, source)


_SL_FILE = re.compile(r"running_app_(u\d+)\.csv$")


def studentlife(
    paths: Union[PathLike, Sequence[PathLike]],
    app_map: Optional[Mapping[str, str]] = None,
    unmapped: str = "tail",
) -> Trace:
    """Converts StudentLife ``app_usage/running_app_uXX.csv`` files (a file,
    a list of files, or the ``app_usage`` directory)."""
    if isinstance(paths, (str, os.PathLike)) and os.path.isdir(paths):
        files = sorted(os.path.join(paths, f) for f in os.listdir(paths) if _SL_FILE.search(f))
        if not files:
            raise ValueError(f"{os.fspath(paths)}: no running_app_uXX.csv file")
    elif isinstance(paths, (str, os.PathLike)):
        files = [paths]
    else:
        files = list(paths)
    users, times, apps, events = [], [], [], []
    pkg_col = "RUNNING_TASKS_topActivity_mPackage"
    for f in files:
        source = os.fspath(f)
        m = _SL_FILE.search(source)
        user = m.group(1) if m else os.path.splitext(os.path.basename(source))[0]
        t = _read(f, ",", source, ("timestamp", pkg_col), "a StudentLife running_app file")
        ts = t.column("timestamp").to_pylist()
        pkgs = t.column(pkg_col).cast(pa.string()).to_pylist()
        front, last_ts = None, None  # the package in front (None: home)
        for row, (s, p) in enumerate(zip(ts, pkgs), start=2):
            if not isinstance(s, (int, float)) or s < 0:
                raise ValueError(f"{source}:{row}: timestamp {s!r} is not Unix seconds")
            if s == last_ts:
                continue  # the rest of the same snapshot: background tasks
            last_ts = s
            home = p is None or "launcher" in p.lower()
            if home:
                if front is not None:
                    users.append(user), times.append(int(s) * 1000), apps.append(front), events.append("close")
                front = None
            elif p != front:
                users.append(user), times.append(int(s) * 1000), apps.append(p), events.append("open")
                front = p
    if not users:
        raise ValueError("studentlife: no app in front in any snapshot")
    t = pa.table({"user": users, "timestamp": times, "app": apps, "event": events})
    mapped = _map_apps(t.column("app"), PACKAGE_MAP, app_map, unmapped, "studentlife")
    return _finish(t.column("user"), t.column("timestamp"), mapped, t.column("event"), "studentlife")


def generic_csv(
    path: PathLike,
    user: str = "user",
    timestamp: str = "timestamp",
    app: str = "app",
    event: Optional[str] = None,
    time_unit: str = "ms",
    delimiter: str = ",",
    open_values: Sequence[str] = ("open", "opened", "launch", "foreground", "start"),
    close_values: Sequence[str] = ("close", "closed", "background", "home", "stop"),
    app_map: Optional[Mapping[str, str]] = None,
    unmapped: str = "tail",
) -> Trace:
    """Converts any CSV/TSV with user, time and app columns (names given).
    ``time_unit``: ``ms`` or ``s`` (Unix time) or ``iso`` (ISO 8601 text).
    Without an ``event`` column every row is an open; with one, values are
    matched case-insensitively against ``open_values`` / ``close_values``
    and other rows are dropped."""
    source = os.fspath(path)
    need = [user, timestamp, app] + ([event] if event else [])
    t = _read(path, delimiter, source, need, "the CSV described")
    ts = t.column(timestamp)
    try:
        if time_unit == "ms":
            ts_ms = ts.cast(pa.int64())
        elif time_unit == "s":
            ts_ms = pc.multiply(ts.cast(pa.float64()), 1000.0).cast(pa.int64(), safe=False)
        elif time_unit == "iso":
            if not pa.types.is_timestamp(ts.type):
                ts = pc.strptime(ts.cast(pa.string()), format="%Y-%m-%dT%H:%M:%S", unit="ms")
            ts_ms = ts.cast(pa.timestamp("ms")).cast(pa.int64())
        else:
            raise ValueError(f"time_unit={time_unit!r}; valid: ms, s, iso")
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise ValueError(f"{source}: column {timestamp!r} is not time in {time_unit}: {e}") from None
    if event:
        ev = pc.utf8_lower(t.column(event).cast(pa.string()))
        is_open = pc.is_in(ev, pa.array([v.lower() for v in open_values]))
        is_close = pc.is_in(ev, pa.array([v.lower() for v in close_values]))
        keep = pc.or_(is_open, is_close)
        t, ts_ms, is_open = t.filter(keep), pc.filter(ts_ms, keep), pc.filter(is_open, keep)
        events = pc.if_else(is_open, "open", "close")
    else:
        events = pa.array(["open"] * t.num_rows, pa.string())
    apps = _map_apps(t.column(app).cast(pa.string()), APP_MAP, app_map, unmapped, source)
    return _finish(t.column(user).cast(pa.string()), ts_ms, apps, events, source)
