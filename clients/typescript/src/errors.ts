/**
 * The errors a call can end with. Every one is a `GatewaydError` with a `code`: the daemon's own
 * error code (docs/design.md section 3: `bad_request`, `queue_full`, `unknown_event`, ...) when the
 * daemon refused the request, else one of this client's, the Python client's codes
 * (`gatewayd.client`): `not_running`, `cannot_connect`, `connection_lost`, `timeout`, `protocol`,
 * `config`, and `closed` (this client was closed) and `backlog_full` (too many calls waiting).
 */

/** A request that failed; `code` says why (the daemon's code, or this client's). */
export class GatewaydError extends Error {
  readonly code: string;

  constructor(code: string, message: string) {
    super(message);
    this.name = "GatewaydError";
    this.code = code;
  }
}

/** The daemon answered `{"ok": false, "error": {code, message}}`: the request was refused. */
export class RequestError extends GatewaydError {
  constructor(code: string, message: string) {
    super(code, `${message} [${code}]`);
    this.name = "RequestError";
  }
}

/**
 * No daemon at the socket (`not_running`), one that cannot be reached (`cannot_connect`), or the connection broke with the request in
 * flight (`connection_lost`: the daemon may or may not have accepted it).
 */
export class ConnectionError extends GatewaydError {
  constructor(code: "not_running" | "cannot_connect" | "connection_lost" | "closed", message: string) {
    super(code, message);
    this.name = "ConnectionError";
  }
}

/** No reply within the call's timeout (the request may still be processed by the daemon). */
export class TimeoutError extends GatewaydError {
  constructor(message: string) {
    super("timeout", message);
    this.name = "TimeoutError";
  }
}

/** The daemon and this client speak no protocol version in common; the message says what to upgrade. */
export class ProtocolError extends GatewaydError {
  constructor(message: string) {
    super("protocol", message);
    this.name = "ProtocolError";
  }
}
