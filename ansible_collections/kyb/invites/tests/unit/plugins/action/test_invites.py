"""The action plugin's own parts: how a file is named, what -v echoes of the files."""

from __future__ import annotations

from ansible_collections.kyb.invites.plugins.action import invites as action


def test_a_file_under_the_playbook_is_named_from_there_and_others_in_full():
    assert action._shown_path("/play/invites/emea.yaml", "/play") == "invites/emea.yaml"
    assert action._shown_path("/elsewhere/emea.yaml", "/play") == "/elsewhere/emea.yaml"


def test_the_files_text_is_not_echoed_back_only_their_paths():
    result = {
        "invocation": {
            "module_args": {
                "src": [{"path": "invites/emea.yaml", "text": "invites:\n  - id: inv_1\n"}],
                "max_resends": 1,
            }
        }
    }
    action._shorten_invocation(result)
    assert result["invocation"]["module_args"] == {"src": ["invites/emea.yaml"], "max_resends": 1}
