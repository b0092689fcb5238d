"""Token accounting from the best source available (DESIGN.md "Accounting").

Sources, in order of trust:

1. the **ledger** (:mod:`.ledger`): what the provider reported for earlier requests,
   exact for the request just sent; consecutive reports measure the turns appended in
   between;
2. a **remote count** (:mod:`.remote`): the serving endpoint's own count of a request
   (vLLM/SGLang ``/tokenize``, llama.cpp ``/apply-template`` + ``/tokenize``,
   llama-cpp-python ``/extras/tokenize/count``, TGI ``/tokenize``, Anthropic
   ``count_tokens``, OpenAI ``responses/input_tokens``, Gemini ``countTokens``), asked
   only when a decision is near the edge;
3. a **local exact tokenizer** (:mod:`.local`) with the family's chat-template
   accounting, chosen automatically when one is installed;
4. the seed's over-counting **heuristic** (:mod:`windowguard.estimate`), times the run's
   calibration, for what nothing has measured yet.
"""
