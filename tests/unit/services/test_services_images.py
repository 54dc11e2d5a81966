"""Images with a prompt, through the services with a fake provider: what reaches the model's
``Message.images`` (the turn's own, then earlier turns' again within the bound), what the
store keeps and proves, and each refusal."""

from __future__ import annotations

import base64
import hashlib
import json
import zlib
from pathlib import Path

import apsw
import pytest

from tests.fixtures.fake_services import Model
from trellisd.errors import InvalidParams, NotFound
from trellisd.policy import LayerSpec, PolicySpec
from trellisd.providers.base import Image, Message
from trellisd.records import ProviderChoice, ToolCall
from trellisd.services import Services, images
from trellisd.services.images import ImageInput, sniff, takes_images
from trellisd.services.turns import TurnRequest
from trellisd.vocabulary import Outcome

PNG = b"\x89PNG\r\n\x1a\n" + b"\0\0\0\rIHDR" + bytes(range(200))
JPEG = b"\xff\xd8\xff\xe0" + bytes(range(100))
GIF = b"GIF89a" + bytes(50)
WEBP = b"RIFF\x10\0\0\0WEBPVP8 " + bytes(40)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


async def opened(app: Services, root: Path, policy: PolicySpec | None = None) -> str:
    return (await app.sessions.open(str(root), None, None, policy)).session_id


async def looked(app: Services, root: Path) -> str:
    """A new session whose one turn carried ``PNG``."""
    session = await opened(app, root)
    one = (ImageInput(data=b64(PNG), mime_type="image/png"),)
    await app.turns.turn(TurnRequest(session, "look", images=one))
    return session


def users(model: Model) -> list[Message]:
    """The user messages of the model's last request."""
    return [m for m in model.requests[-1].messages if m.role == "user"]


def test_the_bytes_magic_names_the_type() -> None:
    assert [sniff(d) for d in (PNG, JPEG, GIF, WEBP, b"hello")] == [
        "image/png",
        "image/jpeg",
        "image/gif",
        "image/webp",
        None,
    ]


@pytest.mark.parametrize(
    ("model", "takes"),
    [
        ("gpt-4o", True),
        ("gpt-3.5-turbo", False),
        ("openai/gpt-3.5-turbo-0125", False),
        ("deepseek-reasoner", False),
        ("claude-sonnet-4-5", True),
        ("o3-mini-2025-01-31", False),
        ("local-llava", True),
    ],
)
def test_models_known_not_to_take_images(model: str, takes: bool) -> None:
    assert takes_images(model) is takes


async def test_a_path_image_and_a_data_image_reach_the_model_and_the_store(
    app: Services, model: Model, root: Path
) -> None:
    (root / "shot.png").write_bytes(PNG)
    session = await opened(app, root)
    given = (ImageInput(path="shot.png"), ImageInput(data=b64(JPEG), mime_type="image/jpeg"))

    result = await app.turns.turn(TurnRequest(session, "what is in these?", images=given))

    first = [m for m in model.requests[0].messages if m.role == "user"][0]
    assert (first.role, first.content) == ("user", "what is in these?")
    assert first.images == (Image("image/png", PNG), Image("image/jpeg", JPEG))
    turn = await app.store.sessions.turn(session, result.turn_id)
    assert [(i.sha256, i.mime_type, i.bytes) for i in turn.images] == [
        (hashlib.sha256(PNG).hexdigest(), "image/png", len(PNG)),
        (hashlib.sha256(JPEG).hexdigest(), "image/jpeg", len(JPEG)),
    ]
    ref, data = await app.turns.images.fetch(session, turn.images[1].sha256)
    assert (ref.mime_type, data) == ("image/jpeg", JPEG)
    assert (await app.sessions.verify(session)).ok


async def test_earlier_images_go_again_with_their_prompts_within_the_bound(
    app: Services, model: Model, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = await opened(app, root)
    await app.turns.turn(
        TurnRequest(session, "one", images=(ImageInput(None, b64(PNG), "image/png"),))
    )
    await app.turns.turn(
        TurnRequest(session, "two", images=(ImageInput(None, b64(GIF), "image/gif"),))
    )
    monkeypatch.setattr(images, "REPLAY_IMAGE_BYTES", len(GIF) + len(WEBP))

    await app.turns.turn(
        TurnRequest(session, "three", images=(ImageInput(None, b64(WEBP), "image/webp"),))
    )

    sent = users(model)
    png = hashlib.sha256(PNG).hexdigest()
    assert sent[0].images == ()
    assert (
        sent[0].content
        == f"one\n\n[image {png[:12]} (image/png, {len(PNG)} bytes): not sent again]"
    )
    assert (sent[1].content, sent[1].images) == ("two", (Image("image/gif", GIF),))
    assert (sent[2].content, sent[2].images) == ("three", (Image("image/webp", WEBP),))


@pytest.mark.parametrize(
    ("given", "words"),
    [
        (ImageInput(path="../out.png"), "images[0].path: ../out.png leads out"),
        (ImageInput(path="missing.png"), "images[0].path: missing.png does not exist"),
        (ImageInput(path="secrets/key.png"), "images[0].path: the session's policy refuses"),
        (ImageInput(path="notes.txt"), "images[0]: the bytes are not a PNG, JPEG, GIF or WebP"),
        (ImageInput(path="link.png"), "images[0].path: link.png leads out of the session root"),
        (ImageInput(data="not base64!", mime_type="image/png"), "images[0].data: data is not"),
        (ImageInput(data=b64(PNG), mime_type="image/bmp"), "images[0].mimeType: mimeType must"),
        (ImageInput(data=b64(JPEG), mime_type="image/png"), "the bytes are image/jpeg, not"),
        (
            ImageInput(data="A" * (28 * 1024 * 1024), mime_type="image/png"),
            "images[0].data: the image is larger than 20 MiB",
        ),
    ],
)
async def test_each_bad_image_is_refused_naming_it_before_anything_is_sent(
    app: Services, model: Model, root: Path, given: ImageInput, words: str
) -> None:
    (root / "notes.txt").write_text("words\n")
    (root / "secrets").mkdir()
    (root / "secrets" / "key.png").write_bytes(PNG)
    (root.parent / "outside.png").write_bytes(PNG)
    (root / "link.png").symlink_to(root.parent / "outside.png")
    policy = PolicySpec((LayerSpec("p", allow_read=("**",), deny_read=("secrets/**",)),))
    session = await opened(app, root, policy)

    with pytest.raises(InvalidParams) as refused:
        await app.turns.turn(TurnRequest(session, "look", images=(given,)))

    assert words in refused.value.message
    assert model.requests == []
    assert await app.store.sessions.history(session) == []


async def test_more_than_sixteen_images_or_a_text_only_model_are_refused(
    app: Services, model: Model, root: Path
) -> None:
    session = await opened(app, root)
    many = tuple(ImageInput(data=b64(PNG), mime_type="image/png") for _ in range(17))
    with pytest.raises(InvalidParams, match="at most 16 images"):
        await app.turns.turn(TurnRequest(session, "look", images=many))

    one = (ImageInput(data=b64(PNG), mime_type="image/png"),)
    with pytest.raises(InvalidParams, match="gpt-3.5-turbo does not take images"):
        await app.turns.turn(
            TurnRequest(session, "look", ProviderChoice(model="gpt-3.5-turbo"), images=one)
        )
    assert model.requests == []


async def test_an_image_of_another_session_is_not_given(app: Services, root: Path) -> None:
    await looked(app, root)
    other = await opened(app, root)
    sha = hashlib.sha256(PNG).hexdigest()

    with pytest.raises(NotFound, match=f"has no image {sha}"):
        await app.turns.images.fetch(other, sha)


async def test_verify_finds_an_altered_or_missing_image_and_deleting_keeps_a_shared_one(
    app: Services, root: Path, tmp_path: Path
) -> None:
    first = await looked(app, root)
    second = await looked(app, root)
    sha = hashlib.sha256(PNG).hexdigest()

    await app.sessions.delete(first)
    assert (await app.sessions.verify(second)).ok  # the other session's image is kept

    con = apsw.Connection(str(tmp_path / "store.db"))
    con.execute("UPDATE blob SET data = ? WHERE sha256 = ?", (zlib.compress(JPEG), sha))
    altered = await app.sessions.verify(second)
    assert not altered.ok and altered.reason is not None and "was altered" in altered.reason
    assert altered.first_bad is not None and altered.first_bad.kind == "event"
    con.execute("DELETE FROM blob WHERE sha256 = ?", (sha,))
    missing = await app.sessions.verify(second)
    assert not missing.ok and missing.reason == f"the bytes of image {sha} are missing"


async def test_a_fork_and_a_file_carry_the_images_byte_for_byte(
    app: Services, model: Model, root: Path, tmp_path: Path
) -> None:
    big = PNG + bytes(range(256)) * (5 * 1024 * 4)  # 5 MiB and a little
    session = await opened(app, root)
    one = (ImageInput(data=b64(big), mime_type="image/png"),)
    result = await app.turns.turn(TurnRequest(session, "look", images=one))
    sha = hashlib.sha256(big).hexdigest()

    fork = await app.store.sessions.fork(session, result.turn_id)
    assert [i.sha256 for i in (await app.store.sessions.history(fork.session_id))[0].images] == [
        sha
    ]
    assert (await app.turns.images.fetch(fork.session_id, sha))[1] == big

    path = str(tmp_path / "out.trellisd")
    await app.archive.export(session, path)
    header = (tmp_path / "out.trellisd").read_bytes().split(b"\n", 1)[0]
    assert b'"version":5' in header
    imported = await app.archive.import_(path, str(root), True)
    turns = await app.store.sessions.history(imported.session_id)
    assert [(i.sha256, i.bytes) for i in turns[0].images] == [(sha, len(big))]
    assert (await app.turns.images.fetch(imported.session_id, sha))[1] == big
    assert (await app.sessions.verify(imported.session_id)).ok
    # The turn after it sends the imported image again with its prompt.
    await app.turns.turn(TurnRequest(imported.session_id, "and now?"))
    assert users(model)[0].images == (Image("image/png", big),)


async def test_a_file_whose_image_bytes_were_changed_is_refused(
    app: Services, root: Path, tmp_path: Path
) -> None:
    session = await looked(app, root)
    path = tmp_path / "out.trellisd"
    await app.archive.export(session, str(path))
    lines = path.read_bytes().split(b"\n")
    at = next(i for i, line in enumerate(lines) if line.startswith(b'{"type":"blob"'))
    packed = base64.b64encode(zlib.compress(JPEG)).decode()
    lines[at] = lines[at].replace(lines[at].split(b'"data":"')[1].split(b'"')[0], packed.encode())
    body = b"\n".join(lines[:-2]) + b"\n"
    end = {"type": "end", "records": len(lines) - 2, "sha256": hashlib.sha256(body).hexdigest()}
    path.write_bytes(body + json.dumps(end).encode() + b"\n")

    with pytest.raises(InvalidParams, match="does not match its SHA-256 and size"):
        await app.archive.import_(str(path), str(root), True)


async def test_a_resumed_turn_sends_its_own_images_again(
    app: Services, model: Model, root: Path
) -> None:
    session = await opened(app, root)
    (root / "a.txt").write_text("a\n")
    model.reply("", ToolCall("c1", "read_file", {"path": "a.txt"}))
    model.reply("It says a.")
    one = (ImageInput(data=b64(GIF), mime_type="image/gif"),)
    paused = await app.turns.turn(TurnRequest(session, "look", step_mode=True, images=one))
    assert paused.outcome == Outcome.PAUSED

    ended = await app.turns.resume(session, paused.turn_id)

    assert ended.outcome == Outcome.FINISHED
    first = [m for m in model.requests[-1].messages if m.role == "user"][0]
    assert (first.content, first.images) == ("look", (Image("image/gif", GIF),))


async def test_a_model_that_takes_no_images_gets_earlier_ones_as_placeholders(
    app: Services, model: Model, root: Path
) -> None:
    session = await looked(app, root)

    await app.turns.turn(
        TurnRequest(session, "now think", ProviderChoice(model="deepseek-reasoner"))
    )

    first = users(model)[0]
    png = hashlib.sha256(PNG).hexdigest()
    assert first.images == ()
    assert first.content.endswith(
        f"[image {png[:12]} (image/png, {len(PNG)} bytes): not sent again]"
    )
