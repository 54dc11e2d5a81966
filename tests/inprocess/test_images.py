"""Images with a prompt over the native protocol, on real pipes with a model server on
127.0.0.1: a path image and a data image reach the model's request with the prompt, the
history shows them, ``session/image`` gives their bytes, a 5 MiB image goes through export
and import byte for byte and the imported session verifies, and every bad image is refused
with a -32602 naming it before anything is sent.

The chat-completions wire's form of an image (``image_url`` with a data URL) is its provider's
part: here the request is checked to carry the turn's prompt, and the images' arrival in the
model's ``Message.images`` is checked in ``tests/unit/services/test_services_images.py``."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest

from tests.fixtures.driver import Daemon, DaemonFactory, open_session, turn
from tests.fixtures.model_server import ModelServer

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8
JPEG = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 4


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def ref(data: bytes, mime: str) -> dict[str, object]:
    return {"sha256": hashlib.sha256(data).hexdigest(), "mimeType": mime, "bytes": len(data)}


async def test_a_turn_with_a_path_image_and_a_data_image(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    (workspace / "shot.png").write_bytes(PNG)
    session = await open_session(daemon, workspace)
    sid = session["sessionId"]
    model.reply("Two pictures.")
    images = [{"path": "shot.png"}, {"data": b64(JPEG), "mimeType": "image/jpeg"}]

    result = await turn(daemon, session, "what are these?", images=images)

    assert result["outcome"] == "finished"
    sent = model.user_messages(0)[-1]  # the chat wire's form: the text, then each image
    assert sent[0] == {"type": "text", "text": "what are these?"}
    urls = [part["image_url"]["url"] for part in sent[1:]]
    assert [u.split(",")[0] for u in urls] == ["data:image/png;base64", "data:image/jpeg;base64"]
    assert [base64.b64decode(u.split(",", 1)[1]) for u in urls] == [PNG, JPEG]
    history = await daemon.call("session/history", {"sessionId": sid})
    assert history["turns"][-1]["images"] == [ref(PNG, "image/png"), ref(JPEG, "image/jpeg")]
    reopened = await daemon.call("session/reopen", {"sessionId": sid})
    assert reopened["history"][-1]["images"] == history["turns"][-1]["images"]
    event = [
        e
        for e in (await daemon.call("run/events", {"runId": result["runId"]}))["events"]
        if e["kind"] == "images"
    ]
    assert [(e["step"], e["detail"]) for e in event] == [
        (1, {"images": [ref(PNG, "image/png"), ref(JPEG, "image/jpeg")]})
    ]
    fetched = await daemon.call(
        "session/image", {"sessionId": sid, "sha256": hashlib.sha256(JPEG).hexdigest()}
    )
    assert base64.b64decode(fetched["data"]) == JPEG
    assert (fetched["mimeType"], fetched["bytes"]) == ("image/jpeg", len(JPEG))
    assert (await daemon.call("session/verify", {"sessionId": sid}))["ok"]
    # A turn without images leaves the field out.
    plain = await turn(daemon, session, "thanks")
    shown = (await daemon.call("session/history", {"sessionId": sid}))["turns"]
    assert shown[-1]["turnId"] == plain["turnId"] and "images" not in shown[-1]


async def test_a_five_mib_image_round_trips_through_export_and_import(
    spawn: DaemonFactory, model: ModelServer, workspace: Path, tmp_path: Path
) -> None:
    big = PNG + bytes(range(256)) * (5 * 1024 * 4)
    first = await spawn()
    session = await open_session(first, workspace)
    sid = session["sessionId"]
    await turn(first, session, "look", images=[{"data": b64(big), "mimeType": "image/png"}])
    path = tmp_path / "pictured.trellisd"

    await first.call("session/export", {"sessionId": sid, "path": str(path)})
    second = await spawn(db=tmp_path / "elsewhere" / "trellisd.db")
    imported = await second.call("session/import", {"path": str(path)})

    sha = hashlib.sha256(big).hexdigest()
    fetched = await second.call(
        "session/image", {"sessionId": imported["sessionId"], "sha256": sha}
    )
    assert base64.b64decode(fetched["data"]) == big
    verdict = await second.call("session/verify", {"sessionId": imported["sessionId"]})
    assert verdict["ok"] and verdict["verified"]
    history = await second.call("session/history", {"sessionId": imported["sessionId"]})
    assert history["turns"][0]["images"] == [ref(big, "image/png")]


@pytest.mark.parametrize(
    ("images", "field", "words"),
    [
        ([{"path": "../out.png"}], "images[0].path", "leads out of the session root"),
        ([{"path": "notes.txt"}], "images[0]", "not a PNG, JPEG, GIF or WebP image"),
        ([{"data": "!!", "mimeType": "image/png"}], "images[0].data", "data is not base64"),
        ([{"data": b64(PNG), "mimeType": "image/tiff"}], "images[0].mimeType", "must be one of"),
        ([{"data": b64(PNG)}], "images[0]", "data needs its mimeType"),
        ([{"path": "a.png", "data": b64(PNG), "mimeType": "image/png"}], "images[0]", "either"),
        ([{"data": b64(PNG), "mimeType": "image/png"}] * 17, "images", "at most 16 images"),
    ],
)
async def test_every_bad_image_is_refused_naming_it(
    daemon: Daemon,
    model: ModelServer,
    workspace: Path,
    images: list[dict[str, str]],
    field: str,
    words: str,
) -> None:
    (workspace / "notes.txt").write_text("words\n")
    session = await open_session(daemon, workspace)

    refused = await daemon.error(
        "session/turn", {"sessionId": session["sessionId"], "prompt": "look", "images": images}
    )

    assert refused.code == -32602
    assert words in refused.message and refused.message.startswith(field)
    assert refused.data["field"].startswith(field)
    assert model.requests == []
    history = await daemon.call("session/history", {"sessionId": session["sessionId"]})
    assert history["turns"] == []


async def test_a_model_known_not_to_take_images_is_refused_before_anything_is_sent(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await open_session(daemon, workspace)
    refused = await daemon.error(
        "session/turn",
        {
            "sessionId": session["sessionId"],
            "prompt": "look",
            "model": "deepseek-reasoner",
            "images": [{"data": b64(PNG), "mimeType": "image/png"}],
        },
    )
    assert refused.code == -32602
    assert "the model deepseek-reasoner does not take images" in refused.message
    assert model.requests == []


async def test_an_image_of_another_session_is_not_given(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    mine = await open_session(daemon, workspace)
    other = await open_session(daemon, workspace)
    await turn(daemon, mine, "look", images=[{"data": b64(PNG), "mimeType": "image/png"}])
    sha = hashlib.sha256(PNG).hexdigest()

    refused = await daemon.error("session/image", {"sessionId": other["sessionId"], "sha256": sha})

    assert refused.code == -32010 and f"has no image {sha}" in refused.message
    bad = await daemon.error("session/image", {"sessionId": mine["sessionId"], "sha256": "abc"})
    assert bad.code == -32602 and bad.data["field"] == "sha256"
