"""How numba reads and writes the engine's records (state.RecordType, a StructRef): as numba's own structref
does, except that reading a field does not need its reference-counting runtime (NRT).

Why: a function compiled with NRT counts a reference to every array it reads out of a record, an atomic update
at the read and another when the function returns. The engine's step reads ~150 arrays across its phases,
which cost more than the step's own work on a small batch. Kernels compile without NRT (jit.py): they borrow
what they read from the records that own it, which outlive every step. Only the kernels that allocate (build a
record, grow a log) keep NRT, and only they may replace a record's array or record field: writing one counts
references (the old value is released, the new one kept), so without NRT numba refuses to compile it. A number
field holds no reference, so any kernel may write it (`eng.now += dt`): no count is taken or dropped.
"""

from __future__ import annotations

from numba.core import cgutils, imputils
from numba.core.datamodel import default_manager, models
from numba.core.extending import infer_getattr, lower_getattr_generic, lower_setattr_generic
from numba.core.runtime.nrtdynmod import _meminfo_struct_type
from numba.core.typing.templates import AttributeTemplate


def register_record_type(record_type) -> None:
    """Make `record_type` (a StructRef subclass) usable in compiled code: its memory layout, the type of each
    field, reading and writing fields."""
    default_manager.register(record_type, models.StructRefModel)

    @infer_getattr
    class _Field(AttributeTemplate):
        key = record_type

        def generic_resolve(self, typ, attr):
            return typ.field_dict.get(attr)

    @lower_getattr_generic(record_type)
    def _read(context, builder, typ, value, attr):
        field = getattr(_payload(context, builder, typ, value), attr)
        # With NRT on, the reader gets its own reference (numba's convention); without, it borrows the record's.
        return imputils.impl_ret_borrowed(context, builder, typ.field_dict[attr], field)

    @lower_setattr_generic(record_type)
    def _write(context, builder, sig, args, attr):
        typ, value_type = sig.args
        record, value = args
        payload = _payload(context, builder, typ, record)
        field_type = typ.field_dict[attr]
        new = context.cast(builder, value, value_type, field_type)
        if context.data_model_manager[field_type].contains_nrt_meminfo():  # an array or record: count it
            context.nrt.incref(builder, field_type, new)  # raises (no NRT) unless an allocating kernel
            context.nrt.decref(builder, field_type, getattr(payload, attr))
        setattr(payload, attr, new)


def _payload(context, builder, typ, value):
    """The record's fields: its meminfo's data pointer, read directly (NRT's NRT_MemInfo_data_fast does the
    same load, but numba will only emit it when NRT is on)."""
    meminfo = cgutils.create_struct_proxy(typ)(context, builder, value=value).meminfo
    header = builder.bitcast(meminfo, _meminfo_struct_type.as_pointer())
    data = builder.load(cgutils.gep(builder, header, 0, 3))
    data_type = typ.get_data_type()
    data = builder.bitcast(data, context.data_model_manager[data_type].get_value_type().as_pointer())
    return cgutils.create_struct_proxy(data_type)(context, builder, ref=data)
