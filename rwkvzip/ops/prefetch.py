"""A memory prefetch hint for kernels: `prefetch(array, i)` asks the CPU to start loading
the cache line of array[i]. It changes no value (a hint, never a load that can fault), so
it is outside the determinism contract's arithmetic; the context models use it to overlap
their table reads for the next byte with the network's forward."""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic

READ = 0
LOCALITY = 3  # keep in every cache level
DATA = 1


@intrinsic
def prefetch(typingctx, array, index):
    """llvm.prefetch of &array[index] (1-D array, index in range)."""
    if not isinstance(array, types.Array) or not isinstance(index, types.Integer):
        return None
    sig = types.void(array, types.intp)

    def codegen(context, builder, signature, args):
        aryty = signature.args[0]
        ary = context.make_array(aryty)(context, builder, args[0])
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [args[1]],
                                       wraparound=False)
        i8p = ir.IntType(8).as_pointer()
        i32 = ir.IntType(32)
        fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
        builder.call(fn, [builder.bitcast(ptr, i8p), ir.Constant(i32, READ),
                          ir.Constant(i32, LOCALITY), ir.Constant(i32, DATA)])
        return context.get_dummy_value()

    return sig, codegen
