"""Every rule a completion must pass before it is shown, one module each, in the order they are asked.

`parses` rules: no parse error the fill is to blame for (`syntax_errors`), no value returned from a `void`
function, none of the constructs tree-sitter accepts and no compiler does (a literal suffix no code may define,
a typed structured binding, `++` on a value, an array from a value, a constant or `auto` without a value, a
number indexed by a number, a type alone, a value keyword declared as a variable), none that compile at most
with a warning but that no one writes (a statement, a loop update or an `if` that does nothing, a variable
initialised with itself or with an assignment, a variable assigned to itself, an operator between an operand and
itself, a zero-length local array, a fraction into an integer, a printf format that does not match its values), a
loop from the thread's global index that steps by one (each thread would redo its successors' elements), no read
of a `__shared__` array the function has not written yet (its contents are undefined), no new member of a run
whose lines around the hole already step one to the next, and no statement that takes the next line as its
rest. `names` rules: every name resolves, nothing the code below needs is left
undeclared, nothing is declared twice, every call takes a number of arguments its callee does.

A new rule is a module here with a `RULE` (`rule.Rule`, or `rule.construct` for a predicate on nodes), listed
in `RULES`, and its golden cases in `tests/checks/`.
"""

from __future__ import annotations

from dice_lsp.completion.checks.rule import Rule
from dice_lsp.completion.checks.rules import (
    arity,
    array_from_value,
    assignment_in_initialiser,
    constant_without_value,
    empty_if,
    fraction_into_integer,
    grid_stride_step,
    idle_loop_update,
    keyword_variable,
    literal_suffix,
    next_line,
    no_effect,
    number_indexed,
    printf_format,
    redeclared,
    run_member,
    same_operands,
    self_assignment,
    self_initialised,
    syntax_errors,
    type_alone,
    typed_binding,
    undeclared,
    unknown_names,
    unwritten_shared,
    update_of_value,
    void_return,
    zero_length_array,
)

RULES: tuple[Rule, ...] = (
    syntax_errors.RULE, void_return.RULE,
    literal_suffix.RULE, typed_binding.RULE, update_of_value.RULE, no_effect.RULE, self_initialised.RULE,
    assignment_in_initialiser.RULE, array_from_value.RULE, self_assignment.RULE, same_operands.RULE,
    zero_length_array.RULE, constant_without_value.RULE, fraction_into_integer.RULE, keyword_variable.RULE,
    number_indexed.RULE, printf_format.RULE, type_alone.RULE, empty_if.RULE, idle_loop_update.RULE,
    grid_stride_step.RULE, unwritten_shared.RULE, run_member.RULE,
    next_line.RULE,
    unknown_names.RULE, undeclared.RULE, redeclared.RULE, arity.RULE,
)
