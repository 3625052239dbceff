"""What a test chat model receives and is given: one ``ScriptedCall`` per call, and a ``Reply``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.messages import BaseMessage

__all__ = ["Method", "Reply", "ScriptedCall"]

Reply = Any
"""One scripted reply: str | dict | BaseModel | AIMessage | BaseException | callable(call) -> reply."""

Method = Literal["function_calling", "json_schema", "json_mode", "tools"]


@dataclass
class ScriptedCall:
    """One call the model received.

    ``method`` is the structured-output method (``function_calling``, ``json_schema``,
    ``json_mode``), ``"tools"`` for plain ``bind_tools``, or ``None`` for a plain call;
    ``schema_name`` names the requested schema; ``metadata`` is the call's ``RunnableConfig``
    metadata (for a streaming call, only what an enclosing chain or graph node passes down:
    LangChain gives ``_stream`` no run manager).
    """

    index: int
    messages: list[BaseMessage]
    schema_name: str | None = None
    method: Method | None = None
    tools: list[str] = field(default_factory=list)
    tool_choice: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def last_text(self) -> str:
        """The text of the last message (usually the prompt's question)."""
        return self.messages[-1].text if self.messages else ""

    @property
    def prompt_text(self) -> str:
        """All message texts joined, for assertions about what the model was shown."""
        return "\n".join(m.text for m in self.messages)
