#!/usr/bin/env python3
"""Writes tests/text/fixtures/chat/*.json: published chat templates (written out from the
models' tokenizer_config.json files) with conversations and what transformers renders for them.

Each conversation is rendered as tokenizer.apply_chat_template(messages, tokenize=False,
add_generation_prompt=...) renders it: messages normalized (keys whose value is None dropped),
special tokens and extra names as template variables, render_jinja_template of the installed
transformers (its sandboxed jinja2 environment). strftime_now is frozen at 2024-07-26. Where a
template has {% generation %} blocks, the ranges transformers records (character offsets) are
stored as UTF-8 byte offsets. Random conversations (a fixed seed) hold unicode and Jinja-looking
text, which must come out as it went in.

Run with the test environment's Python: ~/.cache/shardwise/test-venv/bin/python
"""

import datetime
import json
import pathlib
import random

import jinja2
from transformers.utils import chat_template_utils as ctu

OUT = pathlib.Path(__file__).resolve().parent / "fixtures" / "chat"
NOW = datetime.datetime(2024, 7, 26, 10, 30, 0)

# The templates, as the models' tokenizer_config.json files hold them (written out from the
# published files; Python raw strings, so "\n" inside a Jinja string literal stays an escape).
SMOLLM2 = r"""{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system
You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>
' }}{% endif %}{{'<|im_start|>' + message['role'] + '
' + message['content'] + '<|im_end|>' + '
'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant
' }}{% endif %}"""

LLAMA3 = r"""{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>

'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>

' }}{% endif %}"""

LLAMA31_HEAD = r"""{{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
"""

LLAMA31_DATE = r"""{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
"""

LLAMA32_DATE = r"""{%- if not date_string is defined %}
    {%- if strftime_now is defined %}
        {%- set date_string = strftime_now("%d %b %Y") %}
    {%- else %}
        {%- set date_string = "26 Jul 2024" %}
    {%- endif %}
{%- endif %}
"""

LLAMA31_BODY = r"""{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}

{#- This block extracts the system message, so we can slot it into the right place. #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}

{#- System message + builtin tools #}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{%- if builtin_tools is defined or tools is not none %}
    {{- "Environment: ipython\n" }}
{%- endif %}
{%- if builtin_tools is defined %}
    {{- "Tools: " + builtin_tools | reject('equalto', 'code_interpreter') | join(", ") + "\n\n"}}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {{- "You have access to the following functions. To call a function, please respond with JSON for a function call." }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}

{#- Custom tools are passed in a user message with some extra guidance #}
{%- if tools_in_user_message and not tools is none %}
    {#- Extract the first user message so we can plug it in here #}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
{%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\n\n' -}}
    {{- "Given the following functions, please respond with a JSON for a function call " }}
    {{- "with its proper arguments that best answers the given prompt.\n\n" }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}

{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {%- if builtin_tools is defined and tool_call.name in builtin_tools %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
            {{- "<|python_tag|>" + tool_call.name + ".call(" }}
            {%- for arg_name, arg_val in tool_call.arguments | items %}
                {{- arg_name + '="' + arg_val + '"' }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- endif %}
                {%- endfor %}
            {{- ")" }}
        {%- else  %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
            {{- '{"name": "' + tool_call.name + '", ' }}
            {{- '"parameters": ' }}
            {{- tool_call.arguments | tojson }}
            {{- "}" }}
        {%- endif %}
        {%- if builtin_tools is defined %}
            {#- This means we're in ipython mode #}
            {{- "<|eom_id|>" }}
        {%- else %}
            {{- "<|eot_id|>" }}
        {%- endif %}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
"""

TINYLLAMA = r"""{% for message in messages %}
{% if message['role'] == 'user' %}
{{ '<|user|>
' + message['content'] + eos_token }}
{% elif message['role'] == 'system' %}
{{ '<|system|>
' + message['content'] + eos_token }}
{% elif message['role'] == 'assistant' %}
{{ '<|assistant|>
'  + message['content'] + eos_token }}
{% endif %}
{% if loop.last and add_generation_prompt %}
{{ '<|assistant|>' }}
{% endif %}
{% endfor %}"""

MISTRAL01 = r"""{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token + ' ' }}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}"""

MISTRAL02 = r"""{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content'] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {%- if message['role'] == 'user' %}
        {%- if loop.first and system_message is defined %}
            {{- ' [INST] ' + system_message + '\n\n' + message['content'] + ' [/INST]' }}
        {%- else %}
            {{- ' [INST] ' + message['content'] + ' [/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'assistant' %}
        {{- ' ' + message['content'] + eos_token}}
    {%- else %}
        {{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}
    {%- endif %}
{%- endfor %}
"""

MISTRAL03 = r"""{%- if messages[0]["role"] == "system" %}
    {%- set system_message = messages[0]["content"] %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set loop_messages = messages %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}
{%- set user_messages = loop_messages | selectattr("role", "equalto", "user") | list %}

{#- This block checks for alternating user/assistant messages, skipping tool calling messages #}
{%- set ns = namespace() %}
{%- set ns.index = 0 %}
{%- for message in loop_messages %}
    {%- if not (message.role == "tool" or message.role == "tool_results" or (message.tool_calls is defined and message.tool_calls is not none)) %}
        {%- if (message["role"] == "user") != (ns.index % 2 == 0) %}
            {{- raise_exception("After the optional system message, conversation roles must alternate user/assistant/user/assistant/...") }}
        {%- endif %}
        {%- set ns.index = ns.index + 1 %}
    {%- endif %}
{%- endfor %}

{{- bos_token }}
{%- for message in loop_messages %}
    {%- if message["role"] == "user" %}
        {%- if tools is not none and (message == user_messages[-1]) %}
            {{- "[AVAILABLE_TOOLS] [" }}
            {%- for tool in tools %}
                {%- set tool = tool.function %}
                {{- '{"type": "function", "function": {' }}
                {%- for key, val in tool.items() if key != "return" %}
                    {%- if val is string %}
                        {{- '"' + key + '": "' + val + '"' }}
                    {%- else %}
                        {{- '"' + key + '": ' + val|tojson }}
                    {%- endif %}
                    {%- if not loop.last %}
                        {{- ", " }}
                    {%- endif %}
                {%- endfor %}
                {{- "}}" }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- else %}
                    {{- "]" }}
                {%- endif %}
            {%- endfor %}
            {{- "[/AVAILABLE_TOOLS]" }}
            {%- endif %}
        {%- if loop.last and system_message is defined %}
            {{- "[INST] " + system_message + "\n\n" + message["content"] + "[/INST]" }}
        {%- else %}
            {{- "[INST] " + message["content"] + "[/INST]" }}
        {%- endif %}
    {%- elif message.tool_calls is defined and message.tool_calls is not none %}
        {{- "[TOOL_CALLS] [" }}
        {%- for tool_call in message.tool_calls %}
            {%- set out = tool_call.function|tojson %}
            {{- out[:-1] }}
            {%- if not tool_call.id is defined or tool_call.id|length != 9 %}
                {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
            {%- endif %}
            {{- ', "id": "' + tool_call.id + '"}' }}
            {%- if not loop.last %}
                {{- ", " }}
            {%- else %}
                {{- "]" + eos_token }}
            {%- endif %}
        {%- endfor %}
    {%- elif message["role"] == "assistant" %}
        {{- " " + message["content"]|trim + eos_token}}
    {%- elif message["role"] == "tool_results" or message["role"] == "tool" %}
        {%- if message.content is defined and message.content.content is defined %}
            {%- set content = message.content.content %}
        {%- else %}
            {%- set content = message.content %}
        {%- endif %}
        {{- '[TOOL_RESULTS] {"content": ' + content|string + ", " }}
        {%- if not message.tool_call_id is defined or message.tool_call_id|length != 9 %}
            {{- raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}
        {%- endif %}
        {{- '"call_id": "' + message.tool_call_id + '"}[/TOOL_RESULTS]' }}
    {%- else %}
        {{- raise_exception("Only user and assistant roles are supported, with the exception of an initial optional system message!") }}
    {%- endif %}
{%- endfor %}
"""

QWEN25 = r"""{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\n' + messages[0]['content'] + '<|im_end|>\n' }}
    {%- else %}
        {{- '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\n<tool_call>\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- message.content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}
"""

QWEN3 = r"""{%- if tools %}
    {{- '<|im_start|>system\n' }}
    {%- if messages[0].role == 'system' %}
        {{- messages[0].content + '\n\n' }}
    {%- endif %}
    {{- "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>" }}
    {%- for tool in tools %}
        {{- "\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n" }}
{%- else %}
    {%- if messages[0].role == 'system' %}
        {{- '<|im_start|>system\n' + messages[0].content + '<|im_end|>\n' }}
    {%- endif %}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\n' + content + '<|im_end|>' + '\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in content %}
                {%- set reasoning_content = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') %}
                {%- set content = content.split('</think>')[-1].lstrip('\n') %}
            {%- endif %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\n' + content }}
            {%- endif %}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\n' + content }}
        {%- endif %}
        {%- if message.tool_calls %}
            {%- for tool_call in message.tool_calls %}
                {%- if (loop.first and content) or (not loop.first) %}
                    {{- '\n' }}
                {%- endif %}
                {%- if tool_call.function %}
                    {%- set tool_call = tool_call.function %}
                {%- endif %}
                {{- '<tool_call>\n{"name": "' }}
                {{- tool_call.name }}
                {{- '", "arguments": ' }}
                {%- if tool_call.arguments is string %}
                    {{- tool_call.arguments }}
                {%- else %}
                    {{- tool_call.arguments | tojson }}
                {%- endif %}
                {{- '}\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '<|im_end|>\n' }}
    {%- elif message.role == "tool" %}
        {%- if loop.first or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\n<tool_response>\n' }}
        {{- content }}
        {{- '\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- endif %}
{%- endif %}"""

GEMMA = r"""{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '
' + message['content'] | trim + '<end_of_turn>
' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model
'}}{% endif %}"""

PHI3 = r"""{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>
' + message['content'] + '<|end|>
'}}{% elif message['role'] == 'user' %}{{'<|user|>
' + message['content'] + '<|end|>
'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>
' + message['content'] + '<|end|>
'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>
' }}{% else %}{{ eos_token }}{% endif %}"""

# ChatML with transformers' {% generation %} blocks around the assistant's turns, as TRL's
# training templates and SmolLM3's mark the tokens the loss is taken on.
CHATML_GENERATION = r"""{%- for message in messages %}
    {%- if message['role'] == 'assistant' %}
        {{- '<|im_start|>assistant\n' }}
        {%- generation %}
            {{- message['content'] | trim + '<|im_end|>' }}
        {%- endgeneration %}
        {{- '\n' }}
    {%- else %}
        {{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
{%- endif %}"""

CHATML_SPECIAL = {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>", "unk_token": "<|endoftext|>",
                  "pad_token": "<|im_end|>"}
LLAMA3_SPECIAL = {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}
LLAMA_SPECIAL = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
QWEN_SPECIAL = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
TOOLS = {"tools": [{"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city, ° and ünïcode",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                   "required": ["city"]}}}]}

TEMPLATES = {
    "smollm2_135m_instruct": {"source": "HuggingFaceTB/SmolLM2-135M-Instruct", "template": SMOLLM2,
                              "special_tokens": CHATML_SPECIAL},
    "llama3_instruct": {"source": "meta-llama/Meta-Llama-3-8B-Instruct", "template": LLAMA3,
                        "special_tokens": LLAMA3_SPECIAL},
    "llama3_1_instruct": {"source": "meta-llama/Llama-3.1-8B-Instruct",
                          "template": LLAMA31_HEAD + LLAMA31_DATE + LLAMA31_BODY, "special_tokens": LLAMA3_SPECIAL,
                          "extras": [{"date_string": "01 Jan 2025"}, TOOLS,
                                     {"tools_in_user_message": False, **TOOLS}],
                          "roles": ["system", "user", "assistant", "ipython"]},
    "llama3_2_instruct": {"source": "meta-llama/Llama-3.2-1B-Instruct",
                          "template": LLAMA31_HEAD + LLAMA32_DATE + LLAMA31_BODY, "special_tokens": LLAMA3_SPECIAL,
                          "extras": [{"date_string": "01 Jan 2025"}, TOOLS]},
    "tinyllama_chat": {"source": "TinyLlama/TinyLlama-1.1B-Chat-v1.0", "template": TINYLLAMA,
                       "special_tokens": LLAMA_SPECIAL},
    "mistral_7b_instruct_v0_1": {"source": "mistralai/Mistral-7B-Instruct-v0.1", "template": MISTRAL01,
                                 "special_tokens": LLAMA_SPECIAL},
    "mistral_7b_instruct_v0_2": {"source": "mistralai/Mistral-7B-Instruct-v0.2", "template": MISTRAL02,
                                 "special_tokens": LLAMA_SPECIAL},
    "mistral_7b_instruct_v0_3": {"source": "mistralai/Mistral-7B-Instruct-v0.3", "template": MISTRAL03,
                                 "special_tokens": LLAMA_SPECIAL, "extras": [TOOLS]},
    "qwen2_5_instruct": {"source": "Qwen/Qwen2.5-0.5B-Instruct", "template": QWEN25,
                         "special_tokens": QWEN_SPECIAL, "extras": [TOOLS]},
    "qwen3": {"source": "Qwen/Qwen3-0.6B", "template": QWEN3, "special_tokens": QWEN_SPECIAL,
              "extras": [TOOLS, {"enable_thinking": False}]},
    "gemma_it": {"source": "google/gemma-2-2b-it", "template": GEMMA,
                 "special_tokens": {"bos_token": "<bos>", "eos_token": "<eos>", "unk_token": "<unk>",
                                    "pad_token": "<pad>"}},
    "phi3_mini_instruct": {"source": "microsoft/Phi-3-mini-4k-instruct", "template": PHI3,
                           "special_tokens": {"bos_token": "<s>", "eos_token": "<|endoftext|>",
                                              "unk_token": "<unk>", "pad_token": "<|endoftext|>"}},
    "chatml_generation": {"source": "ChatML with {% generation %} (TRL, SmolLM3)", "template": CHATML_GENERATION,
                          "special_tokens": CHATML_SPECIAL},
}


def render(template, messages, add_generation_prompt, special, extra, ranges):
    compiled = ctu._compile_jinja_template(template)
    compiled.environment.globals["strftime_now"] = lambda fmt: NOW.strftime(fmt)
    conversation = ctu._normalize_chat_messages(messages)
    kwargs = dict(special)
    tools = extra.get("tools")
    kwargs.update({k: v for k, v in extra.items() if k != "tools"})
    rendered, indices = ctu.render_jinja_template(
        conversations=[conversation],
        tools=tools,
        chat_template=template,
        return_assistant_tokens_mask=ranges,
        add_generation_prompt=add_generation_prompt,
        **kwargs,
    )
    text = rendered[0]
    byte_ranges = []
    if ranges:
        for begin, end in indices[0]:
            byte_ranges.append([len(text[:begin].encode()), len(text[:end].encode())])
    return text, byte_ranges


def case(spec, messages, add_generation_prompt=False, extra=None):
    extra = extra or {}
    entry = {"messages": messages, "add_generation_prompt": add_generation_prompt, "extra": extra}
    try:
        text, ranges = render(spec["template"], messages, add_generation_prompt, spec["special_tokens"],
                              extra, "endgeneration" in spec["template"])
        entry["text"] = text
        if ranges:
            entry["generation"] = ranges
    except jinja2.exceptions.TemplateError as e:
        raised = type(e) is jinja2.exceptions.TemplateError  # raise_exception's own class
        entry["error"] = {"raised": raised, "type": type(e).__name__, "message": str(e)}
    except (TypeError, ValueError) as e:
        entry["error"] = {"raised": False, "type": type(e).__name__, "message": str(e)}
    return entry


SYSTEM = {"role": "system", "content": "You are terse."}
FIXED = [
    ([{"role": "user", "content": "Hello!"}], True),
    ([{"role": "user", "content": "Hello!"}], False),
    ([SYSTEM, {"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"}], False),
    ([SYSTEM, {"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"},
      {"role": "user", "content": "And 3+3?"}], True),
    ([{"role": "user", "content": "Ünïcödé 中文 😀 עברית\u200b"}, {"role": "assistant", "content": "  padded \n\n"}], False),
    ([{"role": "user", "content": ""}, {"role": "assistant", "content": ""}], True),
    ([{"role": "user", "content": "{{ messages }} {% for x in y %} {# not a comment #} '\"\\"}], True),
    ([{"role": "user", "content": [{"type": "text", "text": "part one"}, {"type": "text", "text": "part two"}]}], True),
    ([{"role": "user", "content": None}], True),
    ([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}], True),
    ([{"role": "assistant", "content": "first"}], False),
    ([{"role": "tool", "content": "42"}], False),
    ([SYSTEM], True),
]

PIECES = ["hello", "Hi there", " ", "\n", "\t", "  ", "é", "中文", "😀", "\u0301", "עברית", "{{ x }}", "{%- if true %}",
          "{# c #}", "{{", "}}", "%}", "<|im_end|>", "</s>", "[INST]", "'", '"', "\\", "\\n", "</think>", "<think>",
          "None", "0", "1.0", "\r\n", "\u00a0", "\u3000", "{{ raise_exception('x') }}"]


def random_content(rng):
    if rng.random() < 0.02:
        return None
    if rng.random() < 0.03:
        return [{"type": "text", "text": "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 4)))}]
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 8)))


def random_conversation(rng, spec):
    roles = spec.get("roles", ["system", "user", "assistant"])
    n = rng.randint(1, 6)
    messages = []
    if rng.random() < 0.4 and "system" in roles:
        messages.append({"role": "system", "content": random_content(rng)})
    for i in range(n):
        if rng.random() < 0.85:
            role = "user" if i % 2 == 0 else "assistant"
        else:
            role = rng.choice(roles + ["tool"])
        messages.append({"role": role, "content": random_content(rng)})
    return messages


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    for name, spec in TEMPLATES.items():
        rng = random.Random(name)
        cases = [case(spec, m, g) for m, g in FIXED]
        for extra in spec.get("extras", []):
            cases += [case(spec, m, g, extra) for m, g in FIXED[:4]]
        for _ in range(spec.get("random", 200)):
            cases.append(case(spec, random_conversation(rng, spec), rng.random() < 0.5))
        fixture = {"name": name, "source": spec["source"], "template": spec["template"],
                   "special_tokens": spec["special_tokens"], "now": NOW.strftime("%Y-%m-%d"), "cases": cases}
        path = OUT / f"{name}.json"
        path.write_text(json.dumps(fixture, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        errors = sum(1 for c in cases if "error" in c)
        print(f"{path.name}: {len(cases)} conversations, {errors} raise")


if __name__ == "__main__":
    main()
