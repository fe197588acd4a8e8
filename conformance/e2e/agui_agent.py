#!/usr/bin/env python3
"""A real AG-UI agent for the e2e suite: Pydantic AI's AG-UI adapter (requirements-agui.txt)
serving `POST /agent` on 127.0.0.1, its model mock_model.py through the OpenAI provider, with
one tool the mock knows how to call (`run_shell_command`, which only echoes: nothing runs).

Usage: agui_agent.py --port 9300 --model-port 9100
"""
import argparse

import uvicorn
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.ui.ag_ui import AGUIAdapter
from starlette.applications import Starlette
from starlette.routing import Route

ap = argparse.ArgumentParser()
ap.add_argument("--port", type=int, required=True)
ap.add_argument("--model-port", type=int, required=True)
args = ap.parse_args()

model = OpenAIChatModel("mock-model", provider=OpenAIProvider(
    base_url=f"http://127.0.0.1:{args.model_port}/v1", api_key="e2e"))
agent = Agent(model, instructions="Use the tools.")


@agent.tool_plain
def run_shell_command(command: str, description: str = "") -> str:
    """Run a shell command (here: report it, run nothing)."""
    return f"ran: {command}"


async def run(request):
    return await AGUIAdapter.dispatch_request(request, agent=agent)


uvicorn.run(Starlette(routes=[Route("/agent", run, methods=["POST"])]), host="127.0.0.1", port=args.port,
            log_level="warning")
