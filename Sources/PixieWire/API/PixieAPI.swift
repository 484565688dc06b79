/// pixie-server's HTTP API as one table of ``Endpoint`` descriptors, which both ends read: the server registers
/// its routes from it and the device's `PixieClient` calls it, so a path is written once, here.
///
/// Each endpoint is named by docs/openapi.yaml's `operationId`. ``all`` lists the `/v1` ones, ``platform`` the
/// process's own `/healthz` and `/metrics`; PixieServerTests checks that the server registers exactly these and
/// that docs/openapi.yaml documents exactly these.
public enum PixieAPI {}

extension PixieAPI {
    // MARK: relay-svc

    /// A relay connection: a WebSocket over which relay frames travel (docs/pixie-protocol.md, "Relay").
    public static let relayConnect = Endpoint<NoBody, WebSocketFrames>(
        name: "relayConnect", method: .get, path: "/v1/relay", authorization: .perFrame)

    // MARK: phone-verify-svc

    /// Sends a six-digit code to a number (201).
    public static let startPhoneVerification = Endpoint<PhoneVerifyAPI.StartRequest, PhoneVerifyAPI.StartResponse>(
        name: "startPhoneVerification", method: .post, path: "/v1/phone/verifications", authorization: .open)

    /// Checks the code and answers a PhoneOwnershipCert.
    public static let checkPhoneVerification = Endpoint<PhoneVerifyAPI.CheckRequest, PhoneVerifyAPI.CheckResponse>(
        name: "checkPhoneVerification", method: .post, path: "/v1/phone/verifications/check", authorization: .open)

    // MARK: identity-svc

    /// A WebAuthn challenge for a passkey registration or login (201).
    public static let passkeyChallenge = Endpoint<IdentityAPI.ChallengeRequest, IdentityAPI.ChallengeResponse>(
        name: "passkeyChallenge", method: .post, path: "/v1/auth/passkey/challenge", authorization: .open)

    /// A new account with its first device (201).
    public static let createAccount = Endpoint<IdentityAPI.CreateAccountRequest, IdentityAPI.EnrolledResponse>(
        name: "createAccount", method: .post, path: "/v1/accounts", authorization: .phoneCert)

    /// The discovery inbox and key of the cert's own number.
    public static let lookupOwnDiscovery = Endpoint<IdentityAPI.DiscoveryRequest, IdentityAPI.DiscoveryResponse>(
        name: "lookupOwnDiscovery", method: .post, path: "/v1/discovery/own", authorization: .phoneCert)

    /// A single-use grant for another device to join the session's account (201).
    public static let mintGrant = Endpoint<IdentityAPI.GrantRequest, IdentityAPI.GrantResponse>(
        name: "mintGrant", method: .post, path: "/v1/auth/devices/grant", authorization: .session)

    /// Enrolls a device with a grant (or its code) and a passkey registration (201).
    public static let registerWithGrant = Endpoint<IdentityAPI.RegisterRequest, IdentityAPI.EnrolledResponse>(
        name: "registerWithGrant", method: .post, path: "/v1/auth/devices/register", authorization: .grant)

    /// A session from a passkey assertion.
    public static let passkeyLogin = Endpoint<IdentityAPI.PasskeyAssertion, IdentityAPI.EnrolledResponse>(
        name: "passkeyLogin", method: .post, path: "/v1/auth/passkey/login", authorization: .passkey)

    /// Ends the session that authorizes it (204).
    public static let revokeSession = Endpoint<NoBody, NoBody>(
        name: "revokeSession", method: .post, path: "/v1/auth/sessions/revoke", authorization: .session)

    /// The session's account's roster.
    public static let siblings = Endpoint<NoBody, IdentityAPI.SiblingsResponse>(
        name: "siblings", method: .get, path: "/v1/sync/siblings", authorization: .session)

    /// Removes one device and rotates the account's keys (200, once the log holds the rotation).
    public static let removeDevice = Endpoint<IdentityAPI.RemoveDeviceRequest, IdentityAPI.RemoveDeviceResponse>(
        name: "removeDevice", method: .post, path: "/v1/auth/devices/remove", authorization: .session)

    /// The account's epoch, and the rotations past `?after=` with this device's sealed bundle.
    public static let rotations = Endpoint<NoBody, IdentityAPI.RotationsResponse>(
        name: "rotations", method: .get, path: "/v1/auth/devices/rotations", authorization: .session)

    // MARK: blob-svc

    /// Stores a blob: the body is its bytes, `Content-Type` its mime type (201).
    public static let uploadBlob = Endpoint<RawBody, BlobAPI.UploadResponse>(
        name: "uploadBlob", method: .post, path: "/v1/blobs", authorization: .sessionOrPrivateTokens)

    /// A blob's bytes, one `Range` at a time (HEAD gives the headers).
    public static let downloadBlob = Endpoint<NoBody, RawBody>(
        name: "downloadBlob", method: .get, path: "/v1/blobs/{blob_id}", authorization: .capability)

    /// The recipient's ack: deletes the blob now (204).
    public static let ackBlob = Endpoint<NoBody, NoBody>(
        name: "ackBlob", method: .delete, path: "/v1/blobs/{blob_id}", authorization: .capability)

    // MARK: credential-svc

    /// A SenderCert for the session's device.
    public static let senderCert = Endpoint<NoBody, CredentialAPI.SenderCertResponse>(
        name: "senderCert", method: .post, path: "/v1/credentials/sender-cert", authorization: .session)

    /// A token class's key list and the key issuance uses now (`?class=upload` for the upload class).
    public static let tokenKeys = Endpoint<NoBody, CredentialAPI.KeysResponse>(
        name: "tokenKeys", method: .get, path: "/v1/tokens/keys", authorization: .open)

    /// The pre-session mint: four tokens, budgeted per number.
    public static let approvalTokens = Endpoint<CredentialAPI.ApprovalTokenRequest, CredentialAPI.TokenResponse>(
        name: "approvalTokens", method: .post, path: "/v1/approval-tokens/challenge", authorization: .phoneCert)

    /// An enrolled device's refill, budgeted per account.
    public static let sessionTokens = Endpoint<CredentialAPI.SessionTokenRequest, CredentialAPI.TokenResponse>(
        name: "sessionTokens", method: .post, path: "/v1/tokens", authorization: .session)

    // MARK: key transparency (identity-svc)

    /// The latest checkpoint, or the one of `?size=`, as its signed note (`text/plain`).
    public static let ktCheckpoint = Endpoint<NoBody, RawBody>(
        name: "ktCheckpoint", method: .get, path: "/v1/kt/checkpoint", authorization: .open)

    /// The sizes of the checkpoints after `?after=`, at most `?limit=`.
    public static let ktCheckpointSizes = Endpoint<NoBody, TransparencyAPI.SizesResponse>(
        name: "ktCheckpointSizes", method: .get, path: "/v1/kt/checkpoints", authorization: .open)

    /// The consistency proof between `?from=` and `?to=`.
    public static let ktConsistency = Endpoint<NoBody, TransparencyAPI.ProofResponse>(
        name: "ktConsistency", method: .get, path: "/v1/kt/consistency", authorization: .open)

    /// The encoded entries `?start=` ..< `?end=`.
    public static let ktEntries = Endpoint<NoBody, TransparencyAPI.EntriesResponse>(
        name: "ktEntries", method: .get, path: "/v1/kt/entries", authorization: .open)

    /// A label's lookup proof, with the consistency proof from the size the device pinned.
    public static let ktLookup = Endpoint<TransparencyAPI.LookupRequest, TransparencyAPI.LookupResponse>(
        name: "ktLookup", method: .post, path: "/v1/kt/lookup", authorization: .open)

    // MARK: the process

    /// Readiness: the store answers and, on a relay node with NATS, its bus link is up.
    public static let health = Endpoint<NoBody, HealthResponse>(
        name: "health", method: .get, path: "/healthz", authorization: .open)

    /// The Prometheus text exposition.
    public static let metrics = Endpoint<NoBody, RawBody>(
        name: "metrics", method: .get, path: "/metrics", authorization: .open)

    // MARK: the tables

    /// Every `/v1` endpoint, in the order docs/openapi.yaml documents them.
    public static let all: [AnyEndpoint] = [
        AnyEndpoint(relayConnect),
        AnyEndpoint(startPhoneVerification),
        AnyEndpoint(checkPhoneVerification),
        AnyEndpoint(passkeyChallenge),
        AnyEndpoint(createAccount),
        AnyEndpoint(lookupOwnDiscovery),
        AnyEndpoint(mintGrant),
        AnyEndpoint(registerWithGrant),
        AnyEndpoint(passkeyLogin),
        AnyEndpoint(revokeSession),
        AnyEndpoint(siblings),
        AnyEndpoint(removeDevice),
        AnyEndpoint(rotations),
        AnyEndpoint(uploadBlob),
        AnyEndpoint(downloadBlob),
        AnyEndpoint(ackBlob),
        AnyEndpoint(senderCert),
        AnyEndpoint(tokenKeys),
        AnyEndpoint(approvalTokens),
        AnyEndpoint(sessionTokens),
        AnyEndpoint(ktCheckpoint),
        AnyEndpoint(ktCheckpointSizes),
        AnyEndpoint(ktConsistency),
        AnyEndpoint(ktEntries),
        AnyEndpoint(ktLookup),
    ]

    /// The process's own endpoints outside `/v1`: `/healthz` and `/metrics`.
    public static let platform: [AnyEndpoint] = [AnyEndpoint(health), AnyEndpoint(metrics)]
}
