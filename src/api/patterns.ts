/** Taskcluster's slugid: 22 url-safe base64 characters of a v4 UUID. */
export const SLUGID_PATTERN = '^[A-Za-z0-9_-]{8}[Q-T][A-Za-z0-9_-][CGKOSWaeimquy26-][A-Za-z0-9_-]{10}[AQgw]$';
export const SLUGID = new RegExp(SLUGID_PATTERN);
