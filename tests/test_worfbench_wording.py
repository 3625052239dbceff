"""The wording diagnostic's two rewrites change the set phrases and nothing else."""

from __future__ import annotations

from bench.worfbench_wording import in_os_phrases, in_plain_words


def test_plain_words_replace_the_set_phrases_in_nodes_and_leave_the_graph() -> None:
    text = ("Node:\n1: execute bash code to list the .conf files\n2: Execute some bash code to count them\n"
            "3: take answer action\n4: Select the choice from the four answer choices.\n"
            "Edge: (START,1) (1,2) (2,3) (3,4) (4,END)")
    assert in_plain_words(text) == ("Node:\n1: List the .conf files\n2: Count them\n3: Give the answer\n"
                                    "4: Pick the right option\nEdge: (START,1) (1,2) (2,3) (3,4) (4,END)")
    own = "Node:\n1: Find the bash history file that lists the code\nEdge: (START,1) (1,END)"
    assert in_plain_words(own) == own  # a phrase is only replaced where the node starts with it


def test_os_phrases_name_a_call_of_an_os_action_and_leave_other_steps() -> None:
    steps = [
        {"id": "s1", "description": "List the .conf files", "tool": "bash", "args": {"command": "ls"}, "depends_on": []},
        {"id": "s2", "description": "Pick the commonest directive", "tool": None, "args": {}, "depends_on": ["s1"]},
        {"id": "s3", "description": "Answer with it", "tool": "answer", "args": {}, "depends_on": ["s2"]},
    ]
    assert in_os_phrases(steps) == [("s1", "execute bash code to list the .conf files", []),
                                    ("s2", "Pick the commonest directive", ["s1"]),
                                    ("s3", "take answer action", ["s2"])]
