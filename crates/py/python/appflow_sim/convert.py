"""Converters from public app-usage datasets to appflow traces
(docs/python.md "Real traces").

The datasets cannot be redistributed; point these at your own download.

* :func:`lsapp` — LSApp (Aliannejadi et al., TOIS 2021), ``lsapp.tsv``
  or the ``lsapp.tsv.gz`` it ships (a gzip'd tar holding ``lsapp.tsv``):
  tab-separated ``user_id, session_id, timestamp, app_name, event_type``,
  timestamps ``2018-01-16 06:01:05``, the event types LSApp documents:
  ``Opened`` / ``Closed`` / ``User Interaction`` / ``Broken``. Opened →
  open, Closed → close, Broken → close (the app's session ended without
  a Closed row: it is no longer in front), User Interaction rows are
  dropped (the app is already in front).
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

Every converter returns a :class:`~appflow_sim.Trace` whose ``coverage``
(a :class:`Coverage`) counts what became of the source's rows: rows in,
mapped to catalogue apps, given stand-ins, dropped (and why), and users.
It is printed to stderr unless ``verbose=False``.
"""
from __future__ import annotations

import hashlib
import os
import re
import sys
import tarfile
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence, Union

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from . import PathLike, Trace, _bool_arg, _path_arg, _str_arg, catalogue


@dataclass(frozen=True)
class Coverage:
    """What a converter made of its source: every row read is mapped to a
    catalogue app, given a stand-in, or dropped (``rows_in == mapped +
    stand_ins + dropped``)."""

    #: The file (or files) read.
    source: str
    #: Data rows read.
    rows_in: int
    #: Rows in the trace with an app of the catalogue (a counterpart in the map).
    mapped: int
    #: Rows in the trace whose app has no counterpart: a tail stand-in.
    stand_ins: int
    #: Rows not in the trace.
    dropped: int
    #: Users in the trace.
    users: int
    #: Distinct real apps mapped, given stand-ins, dropped.
    apps_mapped: int = 0
    apps_stand_in: int = 0
    apps_dropped: int = 0
    #: Dropped rows by reason.
    dropped_by: dict[str, int] = field(default_factory=dict)

    def __str__(self) -> str:
        why = ", ".join(f"{k} {v:,}" for k, v in self.dropped_by.items() if v)
        return (
            f"{self.source}: {self.rows_in:,} rows in: {self.mapped:,} mapped to catalogue apps "
            f"({self.apps_mapped:,} apps), {self.stand_ins:,} to stand-ins ({self.apps_stand_in:,} apps), "
            f"{self.dropped:,} dropped" + (f" ({why})" if why else "") + f"; {self.users:,} users"
        )

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


#: What became of a row's app (the ``kind`` array of :func:`_map_apps`).
MAPPED, STAND_IN, DROPPED = 0, 1, 2


def _map_apps(
    apps: Any, base: Mapping[str, str], app_map: Optional[Mapping[str, str]], unmapped: str, source: str
) -> tuple[Any, Any, tuple[int, int, int]]:
    """Maps real app names to catalogue names (null: dropped). Returns the
    names, each row's kind (MAPPED, STAND_IN, DROPPED) and the distinct
    apps of each kind."""
    _str_arg("unmapped", unmapped)
    if unmapped not in UNMAPPED:
        raise ValueError(f"unmapped={unmapped!r}; valid: {', '.join(UNMAPPED)}")
    names = set(catalogue().column("name").to_pylist())
    table = dict(base)
    if app_map is not None and not isinstance(app_map, Mapping):
        raise ValueError(f"app_map: expected a dict of real name -> catalogue app, got {type(app_map).__name__}")
    for k, v in (app_map or {}).items():
        if v not in names:
            raise ValueError(f"app_map: {k!r} -> {v!r}: unknown app {v!r}; valid apps: {', '.join(sorted(names))}")
        table[k] = v
    tail = _tail_apps()
    enc = pc.dictionary_encode(apps.combine_chunks() if isinstance(apps, pa.ChunkedArray) else apps)
    uniq = enc.dictionary.to_pylist()
    out: list[Optional[str]] = []
    kinds: list[int] = []
    missing = []
    for u in uniq:
        m = table.get(u) if u is not None else None
        if m is None and u in names:
            m = u  # already a catalogue name
        kind = MAPPED
        if m is None:
            missing.append(u)
            kind = DROPPED
            if unmapped == "tail":
                h = int.from_bytes(hashlib.sha256(str(u).encode()).digest()[:8], "big")
                m = tail[h % len(tail)]
                kind = STAND_IN
        out.append(m)
        kinds.append(kind)
    if missing and unmapped == "error":
        shown = ", ".join(repr(m) for m in missing[:5])
        raise ValueError(f"{source}: {len(missing)} apps have no counterpart in the catalogue (app_map), e.g. {shown}")
    distinct = (kinds.count(MAPPED), kinds.count(STAND_IN), kinds.count(DROPPED))
    return (
        pc.take(pa.array(out, pa.string()), enc.indices),
        pc.take(pa.array(kinds, pa.int8()), enc.indices),
        distinct,
    )


def _clean(text: object, limit: int = 300) -> str:
    """An error text fit to print: control characters (a binary file's
    NULs) escaped, cut to ``limit`` characters."""
    s = "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in str(text))
    return s if len(s) <= limit else s[:limit] + "…"


def _table_file(path: str, source: str) -> tuple[Any, Optional[tarfile.TarFile]]:
    """What to hand to the CSV reader: the path itself (plain or
    compressed by its extension, e.g. ``.gz``), or, for a tar archive (as
    LSApp ships ``lsapp.tsv.gz``), its one table member."""
    if not os.path.exists(path):
        raise ValueError(f"{source}: cannot read: no such file")
    if os.path.isdir(path):
        raise ValueError(f"{source}: cannot read: a directory, not a file")
    try:
        is_tar = tarfile.is_tarfile(path)
    except OSError as e:
        raise ValueError(f"{source}: cannot read: {_clean(e)}") from None
    if not is_tar:
        return path, None
    try:
        tar = tarfile.open(path, "r:*")
        files = [m for m in tar.getmembers() if m.isfile() and not os.path.basename(m.name).startswith(".")]
    except (tarfile.TarError, OSError, EOFError) as e:
        raise ValueError(f"{source}: a broken tar archive: {_clean(e)}") from None
    tables = [m for m in files if m.name.lower().endswith((".tsv", ".csv", ".txt"))] or files
    if len(tables) != 1:
        tar.close()
        names = ", ".join(m.name for m in tables[:5]) or "none"
        raise ValueError(f"{source}: a tar archive holding {len(tables)} table files ({names}); expected one")
    member = tar.extractfile(tables[0])
    if member is None:
        tar.close()
        raise ValueError(f"{source}: cannot read {tables[0].name} in the archive")
    return member, tar


def _coverage(
    source: str, rows_in: int, kinds: Any, distinct: tuple[int, int, int], dropped_by: dict[str, int], users: int
) -> Coverage:
    """Counts the mapped rows' kinds; rows dropped before mapping are in ``dropped_by``."""
    counts = {MAPPED: 0, STAND_IN: 0, DROPPED: 0}
    vc = pc.value_counts(kinds)
    for v, c in zip(vc.field("values").to_pylist(), vc.field("counts").to_pylist()):
        counts[v] = c
    by = dict(dropped_by)
    if counts[DROPPED]:
        by["unmapped app"] = counts[DROPPED]
    cov = Coverage(
        source=source,
        rows_in=rows_in,
        mapped=counts[MAPPED],
        stand_ins=counts[STAND_IN],
        dropped=sum(by.values()),
        users=users,
        apps_mapped=distinct[0],
        apps_stand_in=distinct[1],
        apps_dropped=distinct[2],
        dropped_by=by,
    )
    assert cov.rows_in == cov.mapped + cov.stand_ins + cov.dropped, cov
    return cov


def _report(trace: Trace, cov: Coverage, verbose: bool) -> Trace:
    out = Trace(trace._t, cov)
    if _bool_arg("verbose", verbose):
        print(cov, file=sys.stderr)
    return out


def _read(path: PathLike, delimiter: str, source: str, need: Sequence[str], what: str) -> pa.Table:
    _str_arg("delimiter", delimiter)
    if len(delimiter) != 1:
        raise ValueError(f"delimiter: expected one character, got {delimiter!r}")
    f, tar = _table_file(_path_arg("path", path), source)
    try:
        t = pacsv.read_csv(
            f,
            parse_options=pacsv.ParseOptions(delimiter=delimiter),
            convert_options=pacsv.ConvertOptions(strings_can_be_null=False),
        )
    except FileNotFoundError:
        raise ValueError(f"{source}: cannot read: no such file") from None
    except (pa.ArrowInvalid, OSError, UnicodeDecodeError, EOFError) as e:
        raise ValueError(f"{source}: not {what}: {_clean(e)}") from None
    finally:
        if tar is not None:
            tar.close()
    missing = [c for c in need if c not in t.column_names]
    if missing:
        raise ValueError(
            f"{source}: not {what}: no column {missing[0]!r} (found: {_clean(', '.join(t.column_names))})"
        )
    return t


def _finish(user: Any, ts_ms: Any, app: Any, event: Any, source: str) -> Trace:
    t = pa.table({"user": user, "timestamp": ts_ms, "app": app, "event": event})
    t = t.filter(pc.is_valid(t.column("app")))
    if t.num_rows == 0:
        raise ValueError(f"{source}: no events left after mapping the apps")
    # Stable: same-time rows keep their file order.
    t = t.sort_by([("user", "ascending"), ("timestamp", "ascending")])
    return Trace.from_arrow(t, source)


#: The event types LSApp's README documents, and what each becomes (None: dropped).
LSAPP_EVENTS: dict[str, Optional[str]] = {
    "Opened": "open",
    "Closed": "close",
    "Broken": "close",
    "User Interaction": None,
}


def lsapp(
    path: PathLike,
    app_map: Optional[Mapping[str, str]] = None,
    unmapped: str = "tail",
    verbose: bool = True,
) -> Trace:
    """Converts LSApp's ``lsapp.tsv``, plain, gzip'd, or as shipped
    (``lsapp.tsv.gz``, a gzip'd tar holding ``lsapp.tsv``); docs/python.md."""
    source = _path_arg("path", path)
    t = _read(path, "\t", source, ("user_id", "timestamp", "app_name", "event_type"), "an LSApp TSV")
    rows_in = t.num_rows
    ev = t.column("event_type").cast(pa.string())
    bad = pc.invert(pc.is_in(ev, pa.array(list(LSAPP_EVENTS))))
    if pc.any(bad).as_py():
        first = pc.filter(ev, bad)[0].as_py()
        raise ValueError(
            f"{source}: not an LSApp TSV: event_type {_clean(repr(first))} "
            f"(LSApp documents {', '.join(LSAPP_EVENTS)})"
        )
    dropped_by = {}
    for name, becomes in LSAPP_EVENTS.items():
        if becomes is None:
            dropped_by[name] = pc.sum(pc.equal(ev, name)).as_py() or 0
    keep = pc.is_in(ev, pa.array([k for k, v in LSAPP_EVENTS.items() if v is not None]))
    t = t.filter(keep)
    ts = t.column("timestamp")
    if not pa.types.is_timestamp(ts.type):
        try:
            ts = pc.strptime(ts.cast(pa.string()), format="%Y-%m-%d %H:%M:%S", unit="s")
        except pa.ArrowInvalid as e:
            raise ValueError(f"{source}: not an LSApp TSV: timestamp: {_clean(e)}") from None
    ts_ms = pc.multiply(ts.cast(pa.timestamp("s")).cast(pa.int64()), 1000)
    event = pc.if_else(pc.equal(t.column("event_type").cast(pa.string()), "Opened"), "open", "close")
    app, kinds, distinct = _map_apps(t.column("app_name").cast(pa.string()), APP_MAP, app_map, unmapped, source)
    trace = _finish(t.column("user_id").cast(pa.string()), ts_ms, app, event, source)
    return _report(trace, _coverage(source, rows_in, kinds, distinct, dropped_by, len(trace)), verbose)


_SL_FILE = re.compile(r"running_app_(u\d+)\.csv$")


def studentlife(
    paths: Union[PathLike, Sequence[PathLike]],
    app_map: Optional[Mapping[str, str]] = None,
    unmapped: str = "tail",
    verbose: bool = True,
) -> Trace:
    """Converts StudentLife ``app_usage/running_app_uXX.csv`` files (a file,
    a list of files, or the ``app_usage`` directory)."""
    files: list[str]
    if isinstance(paths, (str, os.PathLike)) and os.path.isdir(paths):
        d = os.fspath(paths)
        files = sorted(os.path.join(d, f) for f in os.listdir(d) if _SL_FILE.search(f))
        if not files:
            raise ValueError(f"{d}: no running_app_uXX.csv file")
    elif isinstance(paths, (str, os.PathLike)):
        files = [_path_arg("paths", paths)]
    else:
        try:
            files = [_path_arg("paths", p) for p in paths]
        except TypeError:
            raise ValueError(f"paths: expected a path or a list of paths, got {type(paths).__name__}") from None
        if not files:
            raise ValueError("paths: expected a path or a non-empty list of paths")
    users: list[str] = []
    times: list[int] = []
    apps: list[str] = []
    events: list[str] = []
    rows_in = 0
    dropped_by = {"background task of a snapshot": 0, "same app still in front": 0, "home screen, no app in front": 0}
    pkg_col = "RUNNING_TASKS_topActivity_mPackage"
    for source in files:
        m = _SL_FILE.search(source)
        user = m.group(1) if m else os.path.splitext(os.path.basename(source))[0]
        t = _read(source, ",", source, ("timestamp", pkg_col), "a StudentLife running_app file")
        rows_in += t.num_rows
        ts = t.column("timestamp").to_pylist()
        pkgs = t.column(pkg_col).cast(pa.string()).to_pylist()
        front, last_ts = None, None  # the package in front (None: home)
        for row, (s, p) in enumerate(zip(ts, pkgs), start=2):
            if isinstance(s, bool) or not isinstance(s, (int, float)) or not 0 <= s < 2**53:
                raise ValueError(f"{source}:{row}: timestamp {s!r} is not Unix seconds")
            if s == last_ts:
                dropped_by["background task of a snapshot"] += 1
                continue
            last_ts = s
            home = p is None or "launcher" in p.lower()
            if home:
                if front is not None:
                    users.append(user)
                    times.append(int(s) * 1000)
                    apps.append(front)
                    events.append("close")
                else:
                    dropped_by["home screen, no app in front"] += 1
                front = None
            elif p != front:
                users.append(user)
                times.append(int(s) * 1000)
                apps.append(p)
                events.append("open")
                front = p
            else:
                dropped_by["same app still in front"] += 1
    if not users:
        raise ValueError("studentlife: no app in front in any snapshot")
    t = pa.table({"user": users, "timestamp": times, "app": apps, "event": events})
    mapped, kinds, distinct = _map_apps(t.column("app"), PACKAGE_MAP, app_map, unmapped, "studentlife")
    trace = _finish(t.column("user"), t.column("timestamp"), mapped, t.column("event"), "studentlife")
    name = files[0] if len(files) == 1 else f"{len(files)} StudentLife files"
    return _report(trace, _coverage(name, rows_in, kinds, distinct, dropped_by, len(trace)), verbose)


TIME_UNITS = ("ms", "s", "iso")


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
    verbose: bool = True,
) -> Trace:
    """Converts any CSV/TSV with user, time and app columns (names given).
    ``time_unit``: ``ms`` or ``s`` (Unix time) or ``iso`` (ISO 8601 text).
    Without an ``event`` column every row is an open; with one, values are
    matched case-insensitively against ``open_values`` / ``close_values``
    and other rows are dropped."""
    source = _path_arg("path", path)
    for name, value in (("user", user), ("timestamp", timestamp), ("app", app), ("time_unit", time_unit)):
        _str_arg(name, value)
    if event is not None:
        _str_arg("event", event)
    if time_unit not in TIME_UNITS:
        raise ValueError(f"time_unit={time_unit!r}; valid: {', '.join(TIME_UNITS)}")
    for name, values in (("open_values", open_values), ("close_values", close_values)):
        if isinstance(values, str) or not all(isinstance(v, str) for v in values):
            raise ValueError(f"{name}: expected a list of strings, got {values!r}")
    need = [user, timestamp, app] + ([event] if event else [])
    t = _read(path, delimiter, source, need, "the CSV described")
    rows_in = t.num_rows
    ts = t.column(timestamp)
    try:
        if time_unit == "ms":
            ts_ms = ts.cast(pa.int64())
        elif time_unit == "s":
            ts_ms = pc.floor(pc.multiply(ts.cast(pa.float64()), 1000.0)).cast(pa.int64())
        else:
            if not pa.types.is_timestamp(ts.type):
                ts = pc.strptime(ts.cast(pa.string()), format="%Y-%m-%dT%H:%M:%S", unit="ms")
            ts_ms = ts.cast(pa.timestamp("ms")).cast(pa.int64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        raise ValueError(f"{source}: column {timestamp!r} is not time in {time_unit}: {_clean(e)}") from None
    dropped_by = {}
    if event:
        ev = pc.utf8_lower(t.column(event).cast(pa.string()))
        is_open = pc.is_in(ev, pa.array([v.lower() for v in open_values]))
        is_close = pc.is_in(ev, pa.array([v.lower() for v in close_values]))
        keep = pc.or_(is_open, is_close)
        dropped_by["event neither open nor close"] = t.num_rows - (pc.sum(keep).as_py() or 0)
        t, ts_ms, is_open = t.filter(keep), pc.filter(ts_ms, keep), pc.filter(is_open, keep)
        events = pc.if_else(is_open, "open", "close")
    else:
        events = pa.array(["open"] * t.num_rows, pa.string())
    apps, kinds, distinct = _map_apps(t.column(app).cast(pa.string()), APP_MAP, app_map, unmapped, source)
    trace = _finish(t.column(user).cast(pa.string()), ts_ms, apps, events, source)
    return _report(trace, _coverage(source, rows_in, kinds, distinct, dropped_by, len(trace)), verbose)
