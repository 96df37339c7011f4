"""Assertions shared by the tests of the command-line tools."""


def assert_bad_input(result, *fragments):
    """``result`` (a click ``CliRunner`` result) refused its input: exit status 2 and one line on
    stderr, no traceback, holding every one of ``fragments``."""
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert "\n" not in line and "Traceback" not in line, line
    for fragment in fragments:
        assert fragment in line, line
