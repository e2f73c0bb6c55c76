/* torch_quiet.c — LD_PRELOADed into the PyTorch reference processes of the
 * tests (tools/torch_ref.py, tests/diff/difftest.py's and opinfo.py's torch
 * children), never into opdispatchd.
 *
 * Why: every c10::Error that libtorch 1.13 throws records a symbolised C++
 * backtrace (backtrace, then backtrace_symbols, whose dladdr scans libtorch's
 * half a million symbols per frame): about 6 ms a raised error, where the
 * call itself takes microseconds. The differential tests ask torch for tens of
 * thousands of refusals, so this was most of their time. Python never shows
 * that trace (only with TORCH_SHOW_CPP_STACKTRACES=1), so an empty one changes
 * no message the tests compare.
 */
int backtrace(void **buffer, int size);

int backtrace(void **buffer, int size)
{
    (void)buffer;
    (void)size;
    return 0;
}
