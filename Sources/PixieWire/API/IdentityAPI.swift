import Foundation
import WebAuthn

/// The JSON bodies of identity-svc: passkeys, accounts, discovery, grants, siblings (docs/pixie-protocol.md,
/// "identity-svc"; docs/openapi.yaml).
public enum IdentityAPI {}

extension IdentityAPI {
    /// What a passkey challenge is for; a challenge is only accepted by the route of its purpose.
    public enum PasskeyPurpose: String, WireChoice {
        /// Enrolling a passkey: account creation, register-with-grant.
        case register
        /// Passkey sign-in.
        case login
        /// Minting a ``GrantScope/replaceAll`` grant: the minting device's own passkey.
        case replaceAll = "replace_all"
        /// Removing one device (``RemoveDeviceRequest``): the challenge names it, and the assertion must carry user
        /// verification.
        case removeDevice = "remove_device"
    }

    /// POST /v1/auth/passkey/challenge.
    public struct ChallengeRequest: Codable, Sendable, Equatable {
        public var purpose: PasskeyPurpose
        /// For ``PasskeyPurpose/removeDevice`` only, and required there: the device the challenge may remove.
        public var deviceID: String?

        public init(purpose: PasskeyPurpose, deviceID: String? = nil) {
            self.purpose = purpose
            self.deviceID = deviceID
        }

        enum CodingKeys: String, CodingKey {
            case purpose
            case deviceID = "device_id"
        }
    }

    /// 201 to ``ChallengeRequest``: single use, for `purpose` only.
    public struct ChallengeResponse: Codable, Sendable, Equatable {
        public var challengeID: String
        public var challenge: Base64URLBytes
        /// The WebAuthn relying party ID the passkey is scoped to.
        public var rpID: String
        /// Unix seconds.
        public var expiresAt: Int64

        public init(challengeID: String, challenge: Base64URLBytes, rpID: String, expiresAt: Int64) {
            self.challengeID = challengeID
            self.challenge = challenge
            self.rpID = rpID
            self.expiresAt = expiresAt
        }

        enum CodingKeys: String, CodingKey {
            case challengeID = "challenge_id"
            case challenge
            case rpID = "rp_id"
            case expiresAt = "expires_at"
        }
    }

    /// A device as it enrolls (docs/pixie-protocol.md, "Devices").
    public struct DeviceFields: Codable, Sendable, Equatable {
        /// The device's hybrid signing public key (``HybridSignature/PublicKey``, 1984 bytes).
        public var pubkey: Base64URLBytes
        /// A name for people, 1 to 64 characters, no control characters.
        public var name: String
        /// The relay inbox its siblings send to: a self-certifying subject (``RelaySubjectKey``).
        public var inbox: Base64URLBytes
        /// The X-Wing public key its siblings seal to (1216 bytes).
        public var sealingKey: Base64URLBytes
        /// Its family for people ("iPhone", "Linux"), as a sibling shows it ("Approve on your iPhone"); the same
        /// rules as the name. Optional: devices enrolled before it have none.
        public var family: String?

        public init(
            pubkey: Base64URLBytes, name: String, inbox: Base64URLBytes, sealingKey: Base64URLBytes,
            family: String? = nil
        ) {
            self.pubkey = pubkey
            self.name = name
            self.inbox = inbox
            self.sealingKey = sealingKey
            self.family = family
        }

        enum CodingKeys: String, CodingKey {
            case pubkey, name, inbox, family
            case sealingKey = "sealing_key"
        }
    }

    /// A new passkey, over a `register` challenge.
    public struct PasskeyRegistration: Codable, Sendable, Equatable {
        public var challengeID: String
        public var credential: RegistrationResponseJSON

        public init(challengeID: String, credential: RegistrationResponseJSON) {
            self.challengeID = challengeID
            self.credential = credential
        }

        enum CodingKeys: String, CodingKey {
            case challengeID = "challenge_id"
            case credential
        }
    }

    /// An assertion of an enrolled passkey, over a `login` (or `replace_all`) challenge. POST
    /// /v1/auth/passkey/login takes it as its body.
    public struct PasskeyAssertion: Codable, Sendable, Equatable {
        public var challengeID: String
        public var credential: AuthenticationResponseJSON

        public init(challengeID: String, credential: AuthenticationResponseJSON) {
            self.challengeID = challengeID
            self.credential = credential
        }

        enum CodingKeys: String, CodingKey {
            case challengeID = "challenge_id"
            case credential
        }
    }

    /// POST /v1/accounts: the first device of a new account.
    public struct CreateAccountRequest: Codable, Sendable, Equatable {
        public var phoneCert: Base64URLBytes
        /// The account's discovery inbox, a self-certifying subject under the discovery seed's subscribe key.
        public var discoveryInbox: Base64URLBytes
        public var discoveryXWingPubkey: Base64URLBytes
        public var accountSigningPubkey: Base64URLBytes
        public var device: DeviceFields
        public var passkey: PasskeyRegistration

        public init(
            phoneCert: Base64URLBytes, discoveryInbox: Base64URLBytes, discoveryXWingPubkey: Base64URLBytes,
            accountSigningPubkey: Base64URLBytes, device: DeviceFields, passkey: PasskeyRegistration
        ) {
            self.phoneCert = phoneCert
            self.discoveryInbox = discoveryInbox
            self.discoveryXWingPubkey = discoveryXWingPubkey
            self.accountSigningPubkey = accountSigningPubkey
            self.device = device
            self.passkey = passkey
        }

        enum CodingKeys: String, CodingKey {
            case phoneCert = "phone_cert"
            case discoveryInbox = "discovery_inbox"
            case discoveryXWingPubkey = "discovery_xwing_pubkey"
            case accountSigningPubkey = "account_signing_pubkey"
            case device, passkey
        }
    }

    /// 201 to account creation and register-with-grant, 200 to passkey sign-in: the device's session.
    public struct EnrolledResponse: Codable, Sendable, Equatable {
        public var accountID: String
        public var deviceID: String
        /// The bearer token for every session route.
        public var sessionToken: String
        /// Unix seconds.
        public var sessionExpiresAt: Int64
        /// The account's label in the transparency log, on enrollment (absent on sign-in); the device keeps it
        /// (the approval carries it to new devices).
        public var ktHandle: String?

        public init(
            accountID: String, deviceID: String, sessionToken: String, sessionExpiresAt: Int64,
            ktHandle: String? = nil
        ) {
            self.accountID = accountID
            self.deviceID = deviceID
            self.sessionToken = sessionToken
            self.sessionExpiresAt = sessionExpiresAt
            self.ktHandle = ktHandle
        }

        enum CodingKeys: String, CodingKey {
            case ktHandle = "kt_handle"
            case accountID = "account_id"
            case deviceID = "device_id"
            case sessionToken = "session_token"
            case sessionExpiresAt = "session_expires_at"
        }
    }

    /// POST /v1/discovery/own: the cert's number is the only lookup key.
    public struct DiscoveryRequest: Codable, Sendable, Equatable {
        public var phoneCert: Base64URLBytes
        public init(phoneCert: Base64URLBytes) { self.phoneCert = phoneCert }
        enum CodingKeys: String, CodingKey { case phoneCert = "phone_cert" }
    }

    /// 200 to ``DiscoveryRequest``: exactly the two fields the seed names; never an account id, never a
    /// device key. The device checks them against `discovery/<phone_id>` in the log.
    public struct DiscoveryResponse: Codable, Sendable, Equatable {
        public var discoveryInbox: Base64URLBytes
        public var discoveryXWingPubkey: Base64URLBytes

        public init(discoveryInbox: Base64URLBytes, discoveryXWingPubkey: Base64URLBytes) {
            self.discoveryInbox = discoveryInbox
            self.discoveryXWingPubkey = discoveryXWingPubkey
        }

        enum CodingKeys: String, CodingKey {
            case discoveryInbox = "discovery_inbox"
            case discoveryXWingPubkey = "discovery_xwing_pubkey"
        }
    }

    /// How a grant is presented.
    public enum GrantKind: String, WireChoice {
        /// 32 random bytes, base64url: the sign-in approval carries it.
        case token
        /// Six digits a person types on the new device, with its phone cert.
        case code
    }

    /// What redeeming a grant may do (docs/pixie-protocol.md, "Grants").
    public enum GrantScope: String, WireChoice {
        /// The new device joins beside the others; redeeming with `revoke_others` is refused.
        case add
        /// The new device may be enrolled with `revoke_others`, removing every other device. Only minted with a
        /// fresh assertion of the minting device's own passkey.
        case replaceAll = "replace_all"
    }

    /// POST /v1/auth/devices/grant (a session). An empty body is all defaults.
    public struct GrantRequest: Codable, Sendable, Equatable {
        /// Default ``GrantKind/token``.
        public var kind: GrantKind?
        /// Default ``GrantScope/add``.
        public var scope: GrantScope?
        /// Required for ``GrantScope/replaceAll``: over a challenge with purpose `replace_all`.
        public var passkey: PasskeyAssertion?

        public init(kind: GrantKind? = nil, scope: GrantScope? = nil, passkey: PasskeyAssertion? = nil) {
            self.kind = kind
            self.scope = scope
            self.passkey = passkey
        }
    }

    /// 201 to ``GrantRequest``: single use, three minutes by default.
    public struct GrantResponse: Codable, Sendable, Equatable {
        public var grant: String
        public var kind: GrantKind
        public var scope: GrantScope
        /// Unix seconds.
        public var expiresAt: Int64

        public init(grant: String, kind: GrantKind, scope: GrantScope, expiresAt: Int64) {
            self.grant = grant
            self.kind = kind
            self.scope = scope
            self.expiresAt = expiresAt
        }

        enum CodingKeys: String, CodingKey {
            case grant, kind, scope
            case expiresAt = "expires_at"
        }
    }

    /// POST /v1/auth/devices/register: enroll a new device in a grant's account. Exactly one of `grant` (a
    /// token grant) or `code` with `phone_cert` (a code grant).
    public struct RegisterRequest: Codable, Sendable, Equatable {
        public var grant: String?
        public var code: String?
        public var phoneCert: Base64URLBytes?
        public var device: DeviceFields
        public var passkey: PasskeyRegistration
        /// False on the sign-in path; true only with a ``GrantScope/replaceAll`` grant.
        public var revokeOthers: Bool

        public init(
            grant: String? = nil, code: String? = nil, phoneCert: Base64URLBytes? = nil, device: DeviceFields,
            passkey: PasskeyRegistration, revokeOthers: Bool = false
        ) {
            self.grant = grant
            self.code = code
            self.phoneCert = phoneCert
            self.device = device
            self.passkey = passkey
            self.revokeOthers = revokeOthers
        }

        enum CodingKeys: String, CodingKey {
            case grant, code, device, passkey
            case phoneCert = "phone_cert"
            case revokeOthers = "revoke_others"
        }
    }

    /// 200 to GET /v1/sync/siblings (a session): the account's roster, the caller included.
    public struct SiblingsResponse: Codable, Sendable, Equatable {
        /// A device of the roster, as ``KeyTransparencyCommitment/roster(_:)`` commits to it.
        public struct Device: Codable, Sendable, Equatable {
            public var deviceID: String
            public var pubkey: Base64URLBytes
            /// Null for a device enrolled before devices registered one.
            public var inbox: Base64URLBytes?
            /// Null for a device enrolled before devices registered one.
            public var sealingKey: Base64URLBytes?
            /// The name it enrolled with, for people. Not in the log: a server could show another, so it labels
            /// a device and never picks one.
            public var name: String
            /// Its family ("iPhone", "Linux"); null for a device that enrolled without one. Not in the log either.
            public var family: String?
            /// When it enrolled, Unix seconds (absent from servers before issue 41).
            public var addedAt: Int64?
            /// The device whose grant enrolled it; null for the account's first device (and for devices enrolled
            /// before issue 41).
            public var addedBy: String?
            /// When it last made a session request, Unix seconds, to the minute; null if it never has since issue 41.
            public var lastSeenAt: Int64?

            public init(
                deviceID: String, pubkey: Base64URLBytes, inbox: Base64URLBytes?, sealingKey: Base64URLBytes?,
                name: String, family: String? = nil, addedAt: Int64? = nil, addedBy: String? = nil,
                lastSeenAt: Int64? = nil
            ) {
                self.deviceID = deviceID
                self.pubkey = pubkey
                self.inbox = inbox
                self.sealingKey = sealingKey
                self.name = name
                self.family = family
                self.addedAt = addedAt
                self.addedBy = addedBy
                self.lastSeenAt = lastSeenAt
            }

            enum CodingKeys: String, CodingKey {
                case deviceID = "device_id"
                case pubkey, inbox, name, family
                case sealingKey = "sealing_key"
                case addedAt = "added_at"
                case addedBy = "added_by"
                case lastSeenAt = "last_seen_at"
            }

            /// A server from before names and families were listed sends neither: the name reads as empty.
            public init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: CodingKeys.self)
                deviceID = try container.decode(String.self, forKey: .deviceID)
                pubkey = try container.decode(Base64URLBytes.self, forKey: .pubkey)
                inbox = try container.decodeIfPresent(Base64URLBytes.self, forKey: .inbox)
                sealingKey = try container.decodeIfPresent(Base64URLBytes.self, forKey: .sealingKey)
                name = try container.decodeIfPresent(String.self, forKey: .name) ?? ""
                family = try container.decodeIfPresent(String.self, forKey: .family)
                addedAt = try container.decodeIfPresent(Int64.self, forKey: .addedAt)
                addedBy = try container.decodeIfPresent(String.self, forKey: .addedBy)
                lastSeenAt = try container.decodeIfPresent(Int64.self, forKey: .lastSeenAt)
            }

            /// Null fields are written as null, not left out, so every device has the same nine keys.
            public func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: CodingKeys.self)
                try container.encode(deviceID, forKey: .deviceID)
                try container.encode(pubkey, forKey: .pubkey)
                try container.encode(inbox, forKey: .inbox)
                try container.encode(sealingKey, forKey: .sealingKey)
                try container.encode(name, forKey: .name)
                try container.encode(family, forKey: .family)
                try container.encode(addedAt, forKey: .addedAt)
                try container.encode(addedBy, forKey: .addedBy)
                try container.encode(lastSeenAt, forKey: .lastSeenAt)
            }
        }

        public var devices: [Device]
        public init(devices: [Device]) { self.devices = devices }
    }
}

extension IdentityAPI.SiblingsResponse {
    /// The roster as ``KeyTransparencyCommitment/roster(_:)`` takes it, so a device can compare the list it was
    /// given with the `devices/<kt_handle>` value in the log. Throws if an inbox is not a subject.
    public func roster() throws(PixieWireError) -> [RosterDevice] {
        try devices.map { device throws(PixieWireError) in
            RosterDevice(
                pubkey: device.pubkey.data,
                inbox: try device.inbox.map { inbox throws(PixieWireError) in
                    try RelaySubject(rawRepresentation: inbox.data)
                },
                sealingKey: device.sealingKey?.data)
        }
    }
}
