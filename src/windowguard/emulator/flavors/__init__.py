"""Wire formats the emulator speaks: OpenAI-compatible chat (OpenAI, vLLM, llama.cpp)
and Anthropic Messages. Each module validates requests, renders replies and streams,
and answers its discovery endpoints; none does I/O."""
