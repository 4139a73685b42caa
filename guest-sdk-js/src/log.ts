/** Logging into the host's log, tagged with the plugin's name and tenant. */
import { backend, type Level } from "./backend.js";

export type { Level };

/** Writes one log record. */
export function log(level: Level, message: string): void {
  backend().log(level, String(message));
}
/** Logs at trace level. */
export const trace = (m: string) => log("trace", m);
/** Logs at debug level. */
export const debug = (m: string) => log("debug", m);
/** Logs at info level. */
export const info = (m: string) => log("info", m);
/** Logs at warn level. */
export const warn = (m: string) => log("warn", m);
/** Logs at error level. */
export const error = (m: string) => log("error", m);
