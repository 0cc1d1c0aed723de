"""The hostile tester's cases against the user's retriever (retrievers/external.py): each failed before its fix.

Through ``retrieve --retriever external`` as the user runs it, with endpoints on 127.0.0.1 and callables in a tmp
folder (test_external_accounting.py holds the helpers and issue 52's cases).
"""

from __future__ import annotations

import json

from retrievers.test_external_accounting import TOKEN, _http, _reply, _retrieve, serve


def test_a_number_of_5000_digits_in_an_answer_is_a_bad_answer_in_one_line(tmp_path, capsys, monkeypatch):
    # hostile S3/M4: before, "ValueError while its answer was read" for every query (int() refuses 5,000 digits)
    monkeypatch.setenv("SEARCH_TOKEN", TOKEN)
    big = b'{"results": [{"id": "q1", "hits": [{"id": "d1", "score": ' + b"9" * 5000 + b"}]}]}"
    with serve(lambda handler, request: _reply(handler, big)) as server:
        beir, params = _http(tmp_path, server, max_failed=1.0)
        code, out, timing = _retrieve(tmp_path, beir, params, "svc")
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "an integer of 5000 digits" in err and "(at response.results[0].hits[0].score)" in err, err
    assert not out.exists() and not timing.exists()
    json.dumps(err)  # the message is text, whatever the number
