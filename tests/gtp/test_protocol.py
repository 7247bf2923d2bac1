"""GTP transport without Go: preprocessing (spec section 2.2), ids, response framing, the reader queue, serve()."""

import io
import os
import threading

import pytest

from gtp_engine.gtp import protocol
from gtp_engine.gtp.protocol import Command, GtpError, Reader, Writer, format_response, parse, preprocess


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("play b d4\r\n", "play b d4"),
        ("\tplay\tb\t d4 ", "play b  d4"),
        ("genmove w # the engine's turn", "genmove w"),
        ("# only a comment", ""),
        ("", ""),
        ("  \r", ""),
        ("na\x00me\x7f\x1b", "name"),
    ],
)
def test_preprocess_follows_spec_section_2_2(raw, expected):
    assert preprocess(raw) == expected


def test_parse_reads_ids_names_and_arguments():
    assert parse("12 play B D4\r\n") == Command(12, "play", ("B", "D4"), "B D4")
    assert parse("Protocol_Version") == Command(None, "protocol_version", (), "")
    assert parse("loadsgf  my  game.sgf 12") == Command(None, "loadsgf", ("my", "game.sgf", "12"), "my  game.sgf 12")
    assert parse("7") == Command(7, "", (), "")
    assert parse("-3 name").id is None  # ids are unsigned
    assert parse("\t# comment") is None


def test_format_response_echoes_ids_and_never_contains_an_empty_line():
    assert format_response(None, True, "") == "=\n\n"
    assert format_response(3, True, "D4") == "=3 D4\n\n"
    assert format_response(4, False, "illegal move") == "?4 illegal move\n\n"
    assert format_response(None, True, "a\n\n\nb\n  \nc\n\n") == "= a\nb\nc\n\n"
    assert format_response(5, True, "\n   A B\n 2 . .") == "=5\n   A B\n 2 . .\n\n"


class Lines:
    """A fake stdin whose lines are fed by the test, one at a time, as a controller would write them."""

    def __init__(self):
        self.read_end, self.write_end = os.pipe()

    def send(self, text: str) -> None:
        os.write(self.write_end, text.encode())

    def close(self) -> None:
        os.close(self.write_end)

    def stream(self):
        return os.fdopen(self.read_end, "rb")


def run_session(handlers, script: str) -> str:
    lines = Lines()
    lines.send(script)
    lines.close()
    out = io.BytesIO()
    ending = protocol.serve(handlers.get, Reader(lines.stream()).start(), Writer(out))
    return ending + "|" + out.getvalue().decode()


def test_serve_answers_in_order_and_survives_failing_handlers():
    def boom(command, stream):
        raise RuntimeError("bug")

    def fail(command, stream):
        raise GtpError("syntax error")

    handlers = {"echo": lambda c, s: " ".join(c.args), "boom": boom, "fail": fail, "quit": lambda c, s: ""}
    transcript = run_session(handlers, "1 echo a b\r\n\n# c\nnope\n2 boom\nfail\n3 quit\necho never\n")
    assert transcript == (
        "quit|=1 a b\n\n? unknown command\n\n?2 internal error: RuntimeError: bug\n\n? syntax error\n\n=3\n\n"
    )


def test_end_of_input_ends_the_session():
    assert run_session({"echo": lambda c, s: "x"}, "echo\n") == "eof|= x\n\n"


def test_stream_is_framed_and_a_new_line_interrupts_it():
    lines = Lines()
    out = io.BytesIO()
    reader = Reader(lines.stream()).start()
    started = threading.Event()

    def analyze(command, stream):
        stream.start()
        started.set()
        stream.interrupted.wait(10)
        stream.line("info stopped")
        return ""

    handlers = {"analyze": analyze, "name": lambda c, s: "engine"}
    session = threading.Thread(target=protocol.serve, args=(handlers.get, reader, Writer(out)))
    session.start()
    lines.send("5 analyze\n")
    assert started.wait(5)
    lines.send("6 name\n")
    lines.close()
    session.join(5)
    assert not session.is_alive()
    assert out.getvalue().decode() == "=5\ninfo stopped\n\n=6 engine\n\n"


def test_pipelined_input_already_waiting_interrupts_a_stream_at_once():
    seen = []

    def analyze(command, stream):
        seen.append(stream.interrupted.is_set())
        return ""

    # A blank line is queued behind "analyze": it must start out interrupted.
    run_session({"analyze": analyze}, "analyze\n\n")
    assert seen == [True]


def test_a_command_with_nothing_behind_it_starts_uninterrupted():
    lines = Lines()
    reader = Reader(lines.stream()).start()
    lines.send("analyze\n")
    assert reader.next().name == "analyze"
    assert not reader.interrupted.is_set()
    lines.send("\n")
    assert reader.interrupted.wait(5)
    lines.close()
    assert reader.next() is None


def test_gogui_interrupt_line_sets_its_own_event_only():
    lines = Lines()
    reader = Reader(lines.stream()).start()
    lines.send("genmove b\n# interrupt\n")
    command = reader.next()
    assert command.name == "genmove"
    assert reader.answer_now.wait(5)
    lines.send("name\n")
    assert reader.next().name == "name"
    lines.close()
    assert reader.next() is None


@pytest.mark.parametrize("ending", ["quit\n", "7 QUIT\n", None])
def test_quit_and_the_end_of_input_ask_the_running_command_for_its_answer_now(ending):
    lines = Lines()
    reader = Reader(lines.stream()).start()
    lines.send("genmove b\n")
    assert reader.next().name == "genmove"
    lines.send("play w d4\n\n")  # other input waits its turn
    assert reader.interrupted.wait(5)
    assert not reader.answer_now.wait(0.2)
    if ending is None:
        lines.close()
    else:
        lines.send(ending)
    assert reader.answer_now.wait(5)
