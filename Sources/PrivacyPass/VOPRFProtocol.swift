import Foundation
import SiblingsCrypto

extension VOPRF {
    /// The client side of RFC 9497 §3.3: ``blind(_:info:blinds:using:)`` the inputs, send the blinded elements,
    /// then ``finalize(_:proof:state:)`` the server's answer into PRF outputs, verifying its proof first
    /// (``Mode/voprf`` and ``Mode/poprf``).
    public struct Client: Sendable {
        public let mode: Mode
        /// The server's key the proof must verify under; nil only in ``Mode/oprf``.
        public let publicKey: PublicKey?
        let suite: Suite

        /// A client for `mode`. ``Mode/voprf`` and ``Mode/poprf`` need the server's public key; ``Mode/oprf``
        /// takes none (it verifies nothing).
        public init(mode: Mode, publicKey: PublicKey?) throws {
            switch (mode, publicKey) {
            case (.oprf, .some):
                throw PrivacyPassError(.invalidInput, "an OPRF (mode 0) client verifies no proof: pass no public key")
            case (.voprf, nil), (.poprf, nil):
                throw PrivacyPassError(
                    .invalidInput, "a \(mode) client needs the server's public key to verify its proof")
            default: break
            }
            self.mode = mode
            self.publicKey = publicKey
            suite = Suite(mode)
        }

        /// What ``finalize(_:proof:state:)`` needs from ``blind(_:info:blinds:using:)``; it holds the secret blinds,
        /// so it stays on the client.
        public struct BlindState: Sendable {
            let inputs: [[UInt8]]
            let blinds: [SecretScalar]
            let blindedElements: [Group.Element]
            let info: [UInt8]
            let tweakedKey: Group.Element?

            /// How many inputs were blinded.
            public var count: Int { inputs.count }
        }

        /// Blind (RFC 9497 §3.3.1, §3.3.3): for each input, blindedElement = blind · HashToGroup(input), with
        /// fresh random blinds.
        ///
        /// - Parameters:
        ///   - inputs: 1 to 65535 inputs, each at most 65535 bytes.
        ///   - info: the POPRF public info string (at most 65535 bytes); must be empty in the other modes.
        /// - Returns: the 32-byte blinded elements to send, and the state to finalize with.
        public func blind(_ inputs: [Data], info: Data = Data()) throws -> (blindedElements: [Data], state: BlindState)
        {
            try blind(inputs, info: info, blinds: nil, using: SystemRandom())
        }

        /// Blind with fixed `blinds` (32-byte scalars) or blinds drawn from `random`: for the RFC 9497 test
        /// vectors only (`@_spi(Testing)`). A blind used twice links the two requests.
        @_spi(Testing)
        public func blind(
            _ inputs: [Data], info: Data = Data(), blinds: [Data]?, using random: some SecureRandomSource
        ) throws -> (blindedElements: [Data], state: BlindState) {
            try Group.ready()
            guard !inputs.isEmpty, inputs.count <= VOPRF.maximumBatchSize else {
                throw PrivacyPassError(.batchSizeMismatch, "blind 1 to 65535 inputs at once, not \(inputs.count)")
            }
            let info = try checkedInfo(info, mode: mode)
            if let blinds, blinds.count != inputs.count {
                throw PrivacyPassError(
                    .batchSizeMismatch, "\(inputs.count) inputs need \(inputs.count) blinds, got \(blinds.count)")
            }
            var tweakedKey: Group.Element?
            if mode == .poprf, let publicKey {
                // tweakedKey = HashToScalar(framedInfo)·G + pkS.
                let m = try suite.infoScalar(info)
                let sum = try Group.add(Group.multiplyBase(m), publicKey.element)
                guard !sum.isIdentity else {
                    throw PrivacyPassError(.invalidInput, "this info string cancels the server's key; use another")
                }
                tweakedKey = sum
            }
            var secrets: [SecretScalar] = []
            var blinded: [Group.Element] = []
            for (index, input) in inputs.enumerated() {
                let blind =
                    try blinds.map { try Group.scalar($0[index], what: "blind \(index)") }
                    ?? Group.randomScalar(using: random)
                guard !blind.isZero else { throw PrivacyPassError(.invalidScalar, "blind \(index) is zero") }
                let element = try suite.inputElement([UInt8](input))
                secrets.append(SecretScalar(blind))
                blinded.append(try Group.multiply(blind, element))
            }
            let state = BlindState(
                inputs: inputs.map { [UInt8]($0) }, blinds: secrets, blindedElements: blinded, info: info,
                tweakedKey: tweakedKey)
            return (blinded.map { Data($0.bytes) }, state)
        }

        /// Finalize (RFC 9497 §3.3.1–3.3.3): verifies the proof over the whole batch (not in ``Mode/oprf``), then
        /// unblinds each evaluated element and hashes it with its input into a 64-byte output.
        ///
        /// Throws ``PrivacyPassError/Code/batchSizeMismatch`` if the answer's count differs from the state's,
        /// ``PrivacyPassError/Code/invalidElement`` for an element that does not decode, and
        /// ``PrivacyPassError/Code/proofVerificationFailed`` if the proof is missing or wrong.
        public func finalize(_ evaluatedElements: [Data], proof: Data?, state: BlindState) throws -> [Data] {
            guard evaluatedElements.count == state.count else {
                throw PrivacyPassError(
                    .batchSizeMismatch,
                    "the server answered \(evaluatedElements.count) elements to \(state.count) blinded ones; "
                        + "discard this answer")
            }
            let evaluated = try evaluatedElements.enumerated().map {
                try Group.element($0.element, what: "evaluated element \($0.offset)")
            }
            switch mode {
            case .oprf:
                guard proof == nil else {
                    throw PrivacyPassError(.invalidInput, "an OPRF (mode 0) answer carries no proof")
                }
            case .voprf, .poprf:
                guard let proof else {
                    throw PrivacyPassError(.proofVerificationFailed, "the server sent no proof; discard this answer")
                }
                let verified: Bool
                if mode == .voprf, let publicKey {
                    verified = suite.verifyProof(
                        publicKey: publicKey.element, c: state.blindedElements, d: evaluated, proof: proof)
                } else if let tweakedKey = state.tweakedKey {
                    verified = suite.verifyProof(
                        publicKey: tweakedKey, c: evaluated, d: state.blindedElements, proof: proof)
                } else {
                    verified = false
                }
                guard verified else {
                    throw PrivacyPassError(
                        .proofVerificationFailed,
                        "the server's proof does not verify under its public key: it did not evaluate with the key it "
                            + "published (or the answer was altered); discard these outputs")
                }
            }
            return try evaluated.indices.map { index in
                let unblinded = try Group.multiply(Group.invert(state.blinds[index].scalar), evaluated[index])
                return suite.outputHash(input: state.inputs[index], info: state.info, unblinded: unblinded)
            }
        }
    }

    /// The server side of RFC 9497 §3.3: ``blindEvaluate(_:info:proofRandomness:using:)`` on blinded elements
    /// (with a proof in ``Mode/voprf`` and ``Mode/poprf``), and ``evaluate(_:info:)`` on a plain input.
    public struct Server: Sendable {
        public let mode: Mode
        public let privateKey: PrivateKey
        let suite: Suite

        public init(mode: Mode, privateKey: PrivateKey) {
            self.mode = mode
            self.privateKey = privateKey
            suite = Suite(mode)
        }

        /// BlindEvaluate (RFC 9497 §3.3.1–3.3.3) on a batch, with one batched DLEQ proof whose scalar r is
        /// fresh and random.
        ///
        /// - Parameters:
        ///   - blindedElements: 1 to 65535 elements of 32 bytes; each must decode and not be the identity.
        ///   - info: the POPRF public info string; must be empty in the other modes.
        /// - Returns: the evaluated elements, and the 64-byte proof (nil in ``Mode/oprf``).
        public func blindEvaluate(
            _ blindedElements: [Data], info: Data = Data()
        ) throws -> (evaluatedElements: [Data], proof: Data?) {
            try blindEvaluate(blindedElements, info: info, proofRandomness: nil, using: SystemRandom())
        }

        /// BlindEvaluate with a fixed proof scalar r, or r drawn from `random`: for the RFC 9497 test vectors
        /// only (`@_spi(Testing)`). Two proofs with the same r give away the server's key (a DLEQ proof is a
        /// Schnorr proof: s = r − c·k, so two of them with one r solve for k).
        @_spi(Testing)
        public func blindEvaluate(
            _ blindedElements: [Data], info: Data = Data(), proofRandomness: Data?,
            using random: some SecureRandomSource
        ) throws -> (evaluatedElements: [Data], proof: Data?) {
            guard !blindedElements.isEmpty, blindedElements.count <= VOPRF.maximumBatchSize else {
                throw PrivacyPassError(
                    .batchSizeMismatch, "evaluate 1 to 65535 blinded elements at once, not \(blindedElements.count)")
            }
            let info = try checkedInfo(info, mode: mode)
            let blinded = try blindedElements.enumerated().map {
                try Group.element($0.element, what: "blinded element \($0.offset)")
            }
            let skS = privateKey.scalar
            var k = skS
            if mode == .poprf {
                // t = skS + HashToScalar(framedInfo); evaluation uses 1/t.
                k = Group.add(skS, try suite.infoScalar(info))
                guard !k.isZero else {
                    throw PrivacyPassError(.invalidInput, "this info string cancels the key (t = 0); use another")
                }
            }
            let multiplier = mode == .poprf ? try Group.invert(k) : k
            let evaluated = try blinded.map { try Group.multiply(multiplier, $0) }
            let output = evaluated.map { Data($0.bytes) }
            guard mode != .oprf else { return (output, nil) }
            let r =
                try proofRandomness.map { try Group.scalar($0, what: "the proof randomness r") }
                ?? Group.randomScalar(using: random)
            let proof: Data
            if mode == .voprf {
                proof = try suite.generateProof(
                    k: k, publicKey: privateKey.publicKey.element, c: blinded, d: evaluated, r: r)
            } else {
                proof = try suite.generateProof(k: k, publicKey: Group.multiplyBase(k), c: evaluated, d: blinded, r: r)
            }
            return (output, proof)
        }

        /// Evaluate (RFC 9497 §3.3.1–3.3.3): the PRF output on `input` directly, as the client's Finalize would
        /// produce it; what an issuer uses to check a redeemed token.
        public func evaluate(_ input: Data, info: Data = Data()) throws -> Data {
            try Group.ready()
            let info = try checkedInfo(info, mode: mode)
            let element = try suite.inputElement([UInt8](input))
            var multiplier = privateKey.scalar
            if mode == .poprf {
                let t = Group.add(multiplier, try suite.infoScalar(info))
                guard !t.isZero else {
                    throw PrivacyPassError(.invalidInput, "this info string cancels the key (t = 0); use another")
                }
                multiplier = try Group.invert(t)
            }
            let evaluated = try Group.multiply(multiplier, element)
            return suite.outputHash(input: [UInt8](input), info: info, unblinded: evaluated)
        }
    }
}

/// The info string as bytes: at most 65535 of them, and only in POPRF.
private func checkedInfo(_ info: Data, mode: VOPRF.Mode) throws -> [UInt8] {
    guard mode == .poprf || info.isEmpty else {
        throw PrivacyPassError(.invalidInput, "only POPRF (mode 2) takes an info string; pass none in \(mode)")
    }
    guard info.count <= 65_535 else {
        throw PrivacyPassError(.invalidInput, "a POPRF info string is at most 65535 bytes, got \(info.count)")
    }
    return [UInt8](info)
}
