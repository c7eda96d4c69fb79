"""Properties and a fuzz run over the frame decoder and request validation."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from broker.protocol import (
    SCHEMAS,
    FrameDecoder,
    FrameTooLarge,
    ProtocolError,
    decode_request,
    decode_response,
    encode_frame,
)
from hypothesis import given, settings
from hypothesis import strategies as st

INT64 = (1 << 63) - 1
json_scalars = (st.none() | st.booleans() | st.integers(-INT64, INT64)
                | st.floats(allow_nan=False, allow_infinity=False) | st.text())
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20)
messages = st.dictionaries(st.text(max_size=10), json_values, max_size=6)


@settings(max_examples=150, deadline=None)
@given(st.lists(messages, max_size=8), st.data())
def test_frames_survive_any_split(msgs: list[dict[str, Any]], data: st.DataObject) -> None:
    stream = b"".join(encode_frame({**m, "id": i}) for i, m in enumerate(msgs))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    dec = FrameDecoder(1 << 20)
    bodies: list[bytes] = []
    prev = 0
    for cut in [*cuts, len(stream)]:
        bodies += dec.feed(stream[prev:cut])
        prev = cut
    assert [decode_response(b) for b in bodies] == [{**m, "id": i} for i, m in enumerate(msgs)]
    assert dec.buffered == 0


@given(st.integers(1025, 1 << 32 - 1))
def test_oversized_length_is_refused_before_buffering(n: int) -> None:
    dec = FrameDecoder(1024)
    with pytest.raises(FrameTooLarge):
        dec.feed(struct.pack(">I", n) + b"x")


@settings(max_examples=1500, deadline=None)
@given(st.binary(max_size=300))
def test_fuzz_decoder_never_raises_anything_but_protocol_errors(blob: bytes) -> None:
    dec = FrameDecoder(256)
    try:
        bodies = dec.feed(blob)
    except FrameTooLarge:
        return
    for body in bodies:
        try:
            req = decode_request(body)
        except ProtocolError as e:
            assert e.code in {"INVALID_REQUEST", "UNSUPPORTED"}
            continue
        assert req["type"] in SCHEMAS


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(sorted(SCHEMAS)), messages)
def test_fuzz_requests_with_random_fields(rtype: str, fields: dict[str, Any]) -> None:
    msg = {**fields, "id": 7, "type": rtype}
    try:
        req = decode_request(encode_frame(msg)[4:])
    except ProtocolError as e:
        assert e.code == "INVALID_REQUEST" and e.request_id == 7
        assert str(e)
        return
    for name in SCHEMAS[rtype]:
        assert name in req


def test_valid_request_passes_and_errors_name_the_field() -> None:
    body = encode_frame({"id": 1, "type": "produce", "partition": 0, "value": 5, "acks": "all",
                         "timeout_ms": 100})[4:]
    assert decode_request(body)["value"] == 5
    with pytest.raises(ProtocolError, match="'acks'"):
        decode_request(encode_frame({"id": 1, "type": "produce", "partition": 0, "value": 5,
                                     "acks": 2, "timeout_ms": 100})[4:])
    with pytest.raises(ProtocolError, match="missing field 'value'"):
        decode_request(encode_frame({"id": 1, "type": "produce", "partition": 0})[4:])
    with pytest.raises(ProtocolError, match="unknown request type"):
        decode_request(encode_frame({"id": 1, "type": "rm -rf"})[4:])
    with pytest.raises(ProtocolError, match="'id'"):
        decode_request(b'{"type": "metadata"}')
    with pytest.raises(ProtocolError, match="integer"):
        decode_request(b'{"id": true, "type": "metadata"}')
    with pytest.raises(ProtocolError, match="'value'"):  # beyond int64
        decode_request(b'{"id": 1, "type": "produce", "partition": 0, '
                       b'"value": 1180591620717411303424, "acks": "1", "timeout_ms": 1}')
