/* Whether a config's kernels are compiled for a combination of its space's instantiated key values
 * (`instantiate`): bit `combo` of the combos the generator passes the family's DEFINE macro
 * (ktune_instance.combos), combo the sum of the values' KTUNE_<FAMILY>_COMBO_<DIM>_<VALUE>. A
 * dispatch tests it with `if constexpr`, so that a combination not compiled is not instantiated:
 * the selection never launches a config for a key it is not compiled for. */
#pragma once

constexpr bool ktune_compiled(unsigned long long combos, int combo)
{
    return combo >= 0 && combo < 64 && ((combos >> combo) & 1) != 0;
}
