import Foundation

extension IdentityAPI {
    /// POST /v1/auth/devices/remove (a session): one listed device removes another, with a fresh assertion of its
    /// own passkey (user verification required) over a `remove_device` challenge naming that device, and the
    /// rotation of every secret the removed device held (docs/pixie-protocol.md, "Revoking a device").
    public struct RemoveDeviceRequest: Codable, Sendable, Equatable {
        /// The device to remove: listed, and not the caller.
        public var deviceID: String
        /// The account's epoch the rotation was made at; another removal committed meanwhile is a 409.
        public var expectedEpoch: UInt64
        public var passkey: PasskeyAssertion
        public var rotation: Rotation

        public init(deviceID: String, expectedEpoch: UInt64, passkey: PasskeyAssertion, rotation: Rotation) {
            self.deviceID = deviceID
            self.expectedEpoch = expectedEpoch
            self.passkey = passkey
            self.rotation = rotation
        }

        enum CodingKeys: String, CodingKey {
            case deviceID = "device_id"
            case expectedEpoch = "expected_epoch"
            case passkey, rotation
        }

        /// The account's new keys, the signed statement that binds them to the old key, and one sealed
        /// ``RotationBundle`` for each device that stays (the remover included).
        public struct Rotation: Codable, Sendable, Equatable {
            public var accountSigningPubkey: Base64URLBytes
            public var discoveryInbox: Base64URLBytes
            public var discoveryXWingPubkey: Base64URLBytes
            /// ``AccountRotation/encoded``.
            public var statement: Base64URLBytes
            public var bundles: [SealedBundle]

            public init(
                accountSigningPubkey: Base64URLBytes, discoveryInbox: Base64URLBytes,
                discoveryXWingPubkey: Base64URLBytes, statement: Base64URLBytes, bundles: [SealedBundle]
            ) {
                self.accountSigningPubkey = accountSigningPubkey
                self.discoveryInbox = discoveryInbox
                self.discoveryXWingPubkey = discoveryXWingPubkey
                self.statement = statement
                self.bundles = bundles
            }

            enum CodingKeys: String, CodingKey {
                case accountSigningPubkey = "account_signing_pubkey"
                case discoveryInbox = "discovery_inbox"
                case discoveryXWingPubkey = "discovery_xwing_pubkey"
                case statement, bundles
            }
        }

        /// ``RotationBundle/seal(to:device:)`` for one remaining device.
        public struct SealedBundle: Codable, Sendable, Equatable {
            public var deviceID: String
            public var bundle: Base64URLBytes

            public init(deviceID: String, bundle: Base64URLBytes) {
                self.deviceID = deviceID
                self.bundle = bundle
            }

            enum CodingKeys: String, CodingKey {
                case deviceID = "device_id"
                case bundle
            }
        }
    }

    /// 200 to ``RemoveDeviceRequest``, once a checkpoint holds the rotation.
    public struct RemoveDeviceResponse: Codable, Sendable, Equatable {
        /// The account's epoch now (the version of `account/<kt_handle>` the log holds).
        public var epoch: UInt64
        public var removedDeviceID: String

        public init(epoch: UInt64, removedDeviceID: String) {
            self.epoch = epoch
            self.removedDeviceID = removedDeviceID
        }

        enum CodingKeys: String, CodingKey {
            case epoch
            case removedDeviceID = "removed_device_id"
        }
    }

    /// 200 to GET /v1/auth/devices/rotations?after=N (a session): the account's epoch, and the rotations past `N`
    /// with the bundle sealed to the session's device, oldest first. A rotation the server holds no bundle for
    /// (withheld, or one this device was not listed for) comes with a null bundle, so the device can say which.
    public struct RotationsResponse: Codable, Sendable, Equatable {
        public struct Rotation: Codable, Sendable, Equatable {
            public var epoch: UInt64
            /// ``AccountRotation/encoded``.
            public var statement: Base64URLBytes
            public var bundle: Base64URLBytes?

            public init(epoch: UInt64, statement: Base64URLBytes, bundle: Base64URLBytes?) {
                self.epoch = epoch
                self.statement = statement
                self.bundle = bundle
            }

            public func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: CodingKeys.self)
                try container.encode(epoch, forKey: .epoch)
                try container.encode(statement, forKey: .statement)
                try container.encode(bundle, forKey: .bundle)
            }
        }

        public var epoch: UInt64
        public var rotations: [Rotation]

        public init(epoch: UInt64, rotations: [Rotation]) {
            self.epoch = epoch
            self.rotations = rotations
        }
    }
}
