"""The kubelet's wording in image pull messages: Go's durations and gRPC errors."""

from __future__ import annotations

import pytest
from pkletd.ipc.runtime.cri import CriError
from pkletd.supervisor.pods.events import go_duration


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0, "0s"),
        (0.0309, "30ms"),
        (1.0, "1s"),
        (1.5944, "1.594s"),
        (60.0, "1m0s"),
        (125.25, "2m5.25s"),
        (3605.0, "1h0m5s"),
    ],
)
def test_durations_print_as_go_prints_them(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text


def test_pull_errors_quote_the_grpc_status_as_go_prints_it() -> None:
    missing = CriError("PullImage", "image=x", "NOT_FOUND", "x: not found")
    assert missing.rpc_message == "rpc error: code = NotFound desc = x: not found"
    slow = CriError("PullImage", "image=x", "DEADLINE_EXCEEDED", "context deadline exceeded")
    assert slow.rpc_message.startswith("rpc error: code = DeadlineExceeded desc = ")
    unknown = CriError("PullImage", "image=x", "UNKNOWN", "failed to unpack")
    assert unknown.rpc_message == "failed to unpack"  # the kubelet strips an Unknown code
