"""JSON Schema to grammar: :func:`automask.schema.compiler.compile_schema`.

``Grammar.from_json_schema`` finds the compiler through
:func:`~automask.grammar.ir.register_front_end` (the IR imports no front
end); the compiler is imported on its first use, to keep ``import automask`` light.
"""

from automask.grammar.ir import Grammar, register_front_end


def _compile_schema(schema, **options) -> Grammar:
    from automask.schema.compiler import compile_schema

    return compile_schema(schema, **options)


register_front_end("json_schema", _compile_schema)
