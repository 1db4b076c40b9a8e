/**
 * Folding unusable hardware in the picker: one line per provider and reason
 * ("AWS: no credentials — set AWS_PROFILE or run `aws configure`") that
 * expands to its greyed rows. The same rule as jupyter_remote_hw/hardware_folds.py.
 * Free of DOM, so it is unit tested on its own.
 */
import { IHardware } from './model';

/** Unusable rows of one provider that share a reason. */
export interface IHardwareFold {
  /** `aws:no credentials`: the same across listings, so a fold stays open. */
  key: string;
  provider: string;
  title: string;
  reason: string;
  hint: string;
  options: IHardware[];
}

/** One line of the picker: a row, or a fold (followed by its rows when expanded). */
export type PickerEntry =
  { kind: 'option'; option: IHardware } | { kind: 'fold'; fold: IHardwareFold; expanded: boolean };

/**
 * The listing as the picker shows it: usable rows first, in order; then, per
 * provider and reason, one fold for two or more unusable rows (a lone unusable
 * row is shown as itself). An expanded fold is followed by its rows.
 */
export function foldHardware(options: IHardware[], expanded: ReadonlySet<string>): PickerEntry[] {
  const entries: PickerEntry[] = options
    .filter(o => o.usable)
    .map(option => ({ kind: 'option' as const, option }));
  const groups = new Map<string, IHardware[]>();
  for (const option of options) {
    if (!option.usable) {
      const key = `${option.provider}:${option.reason || option.why_not || ''}`;
      groups.set(key, [...(groups.get(key) ?? []), option]);
    }
  }
  for (const [key, rows] of groups) {
    if (rows.length === 1) {
      entries.push({ kind: 'option', option: rows[0] });
      continue;
    }
    const first = rows[0];
    const fold: IHardwareFold = {
      key,
      provider: first.provider,
      title: first.provider_title || first.provider.toUpperCase(),
      reason: first.reason || first.why_not || 'not available',
      hint: first.reason ? (first.hint ?? '') : '',
      options: rows
    };
    const open = expanded.has(key);
    entries.push({ kind: 'fold', fold, expanded: open });
    if (open) {
      entries.push(...rows.map(option => ({ kind: 'option' as const, option })));
    }
  }
  return entries;
}

/** `AWS: no credentials — set AWS_PROFILE or run `aws configure``. */
export function foldText(fold: IHardwareFold): string {
  return fold.hint
    ? `${fold.title}: ${fold.reason} — ${fold.hint}`
    : `${fold.title}: ${fold.reason}`;
}

/** `44 types`: how many rows a fold holds. */
export function foldCount(fold: IHardwareFold): string {
  return `${fold.options.length} ${fold.options.length === 1 ? 'type' : 'types'}`;
}

/** Text split at backticks: the odd parts are commands, shown as code. */
export function codeParts(text: string): { text: string; code: boolean }[] {
  return text
    .split('`')
    .map((part, index) => ({ text: part, code: index % 2 === 1 }))
    .filter(part => part.text);
}
