import Foundation
import SiblingsCrypto

/// Six words from Sempere's join word list: 66 bits (6 × 11) that a person reads on one device and
/// types on the other (docs/sempere-join-words.md).
///
/// The join protocol derives them from the transcript of a join (the request and the vault identity)
/// with ``derive(from:)``; both devices compute them, one shows them and the person types them on the
/// other, which compares. Typing accepts any case and spacing, and any unique start of a word (every
/// word is identified by its first four letters).
public struct JoinWords: Sendable, Hashable, CustomStringConvertible {
    /// Words in a phrase.
    public static let wordCount = 6
    /// Bits each word carries: the list has 2048 words.
    public static let bitsPerWord = 11
    /// Bits the six words carry.
    public static let bitCount = wordCount * bitsPerWord
    /// The number of words in the list.
    public static let listCount = 1 << bitsPerWord
    /// The domain label ``derive(from:)`` hashes before the transcript.
    public static let derivationLabel = "sempere.org/join-words/v1"

    /// The word list, version 1 (`scripts/make-wordlist.py`; never changes once released).
    public static let list: [String] = listText.split(separator: "\n").map(String.init)

    private static let indexOfWord: [String: Int] = Dictionary(
        uniqueKeysWithValues: list.enumerated().map { ($1, $0) })

    /// Each word's index in ``list``, each below 2048.
    public let indices: [Int]

    /// The six words, lowercase, in order.
    public var words: [String] { indices.map { Self.list[$0] } }

    /// The words separated by single spaces.
    public var description: String { words.joined(separator: " ") }

    /// Six words from their indices in ``list``.
    public init(indices: [Int]) throws {
        guard indices.count == Self.wordCount else {
            throw SempereError(.wrongWordCount, "join words are \(Self.wordCount) words, got \(indices.count)")
        }
        guard indices.allSatisfy({ (0..<Self.listCount).contains($0) }) else {
            throw SempereError(.invalidEncoding, "a join word index is outside 0..<\(Self.listCount)")
        }
        self.indices = indices
    }

    /// The words encoding the first 66 bits of `bits` (at least 9 bytes), most significant bit first.
    ///
    /// With `exact` (the default) `bits` must be exactly 9 bytes whose last 6 bits are zero, so
    /// ``bits`` gives them back unchanged; without it, bits after the first 66 are ignored.
    public init(bits: some DataProtocol, exact: Bool = true) throws {
        let bytes = [UInt8](bits)
        let needed = (Self.bitCount + 7) / 8
        guard exact ? bytes.count == needed : bytes.count >= needed else {
            throw SempereError(
                .invalidEncoding, "join words encode \(needed) bytes (66 bits), got \(bytes.count) bytes")
        }
        if exact, bytes[needed - 1] & 0x3F != 0 {
            throw SempereError(
                .invalidEncoding, "join words encode 66 bits: the last 6 bits of the 9 bytes must be zero")
        }
        var indices: [Int] = []
        for word in 0..<Self.wordCount {
            var value = 0
            for bit in 0..<Self.bitsPerWord {
                let position = word * Self.bitsPerWord + bit
                let set = (bytes[position / 8] >> (7 - UInt8(position % 8))) & 1
                value = value << 1 | Int(set)
            }
            indices.append(value)
        }
        self.indices = indices
    }

    /// The 66 bits the words encode, as 9 bytes whose last 6 bits are zero.
    public var bits: Data {
        var bytes = [UInt8](repeating: 0, count: (Self.bitCount + 7) / 8)
        for (word, value) in indices.enumerated() {
            for bit in 0..<Self.bitsPerWord where (value >> (Self.bitsPerWord - 1 - bit)) & 1 == 1 {
                let position = word * Self.bitsPerWord + bit
                bytes[position / 8] |= 0x80 >> UInt8(position % 8)
            }
        }
        return Data(bytes)
    }

    /// The six words for a join transcript: the first 66 bits of
    /// SHA-256(``derivationLabel`` ‖ 0x00 ‖ transcript).
    ///
    /// The join protocol feeds it an unambiguous encoding of the request and the vault identity, so the
    /// words match on both devices only when both saw the same request for the same vault.
    public static func derive(from transcript: some DataProtocol) -> JoinWords {
        var hash = SHA256()
        hash.update(data: Data(derivationLabel.utf8) + [0])
        hash.update(data: transcript)
        // 32 bytes are always enough for 66 bits.
        return try! JoinWords(bits: hash.finalize().rawRepresentation, exact: false)
    }

    /// Parses words a person typed: any case, separated by spaces, tabs, newlines, commas, dots or
    /// hyphens; each word may be shortened to any start that only one word of the list has (four
    /// letters always suffice).
    ///
    /// - Throws: ``SempereError/Code/unknownWord`` naming the word and the closest word of the list,
    ///   ``SempereError/Code/ambiguousWord`` with the words it could be, or
    ///   ``SempereError/Code/wrongWordCount``.
    public init(parsing text: String) throws {
        // Six words fit in far less; longer text (a pasted file) is refused before any work on it.
        guard text.utf8.count <= Self.maximumTypedBytes else {
            throw SempereError(
                .wrongWordCount,
                "expected \(Self.wordCount) words, got \(text.utf8.count) bytes of text: type the six words the other "
                    + "device shows")
        }
        let separators = CharacterSet.whitespacesAndNewlines.union(CharacterSet(charactersIn: ",.-"))
        let typed = text.lowercased().components(separatedBy: separators).filter { !$0.isEmpty }
        guard typed.count == Self.wordCount else {
            throw SempereError(
                .wrongWordCount,
                "expected \(Self.wordCount) words, got \(typed.count): type the six words the other device shows")
        }
        self.indices = try typed.enumerated().map { try Self.index(of: $1, position: $0 + 1) }
    }

    /// The longest text ``init(parsing:)`` reads: six of the longest words with generous separators.
    static let maximumTypedBytes = 1024

    /// The index of one typed word (lowercased), or of the only word it is the start of.
    static func index(of typed: String, position: Int) throws -> Int {
        if let index = indexOfWord[typed] { return index }
        let matches = typed.allSatisfy({ $0.isASCII && $0.isLetter }) ? range(withPrefix: typed) : 0..<0
        if matches.count == 1 { return matches.lowerBound }
        if matches.count > 1 {
            let some = matches.prefix(4).map { list[$0] }.joined(separator: ", ")
            throw SempereError(
                .ambiguousWord,
                "word \(position), \"\(typed)\", could be \(some)\(matches.count > 4 ? ", ..." : ""): "
                    + "type more letters (four always suffice)")
        }
        throw SempereError(
            .unknownWord,
            "word \(position), \"\(typed.prefix(32))\", is not a join word; did you mean \"\(suggestion(for: typed))\"?"
        )
    }

    /// The indices of the words starting with `prefix` (the list is sorted, so they are contiguous).
    static func range(withPrefix prefix: String) -> Range<Int> {
        var low = 0
        var high = list.count
        while low < high {
            let middle = (low + high) / 2
            if list[middle] < prefix { low = middle + 1 } else { high = middle }
        }
        var end = low
        while end < list.count, list[end].hasPrefix(prefix) { end += 1 }
        return low..<end
    }

    /// The word of the list closest to `typed`: fewest edits (Levenshtein distance, on its first four
    /// letters and on the whole word, whichever is closer), then the longest shared start, then the
    /// first in the list.
    static func suggestion(for typed: String) -> String {
        let input = Array(typed.prefix(32).utf8)
        var best = (distance: Int.max, shared: 0, word: list[0])
        for word in list {
            let letters = Array(word.utf8)
            let distance = min(
                editDistance(input, letters), editDistance(Array(input.prefix(4)), Array(letters.prefix(4))) + 1)
            let shared = zip(input, letters).prefix { $0 == $1 }.count
            if distance < best.distance || (distance == best.distance && shared > best.shared) {
                best = (distance, shared, word)
            }
        }
        return best.word
    }

    static func editDistance(_ a: [UInt8], _ b: [UInt8]) -> Int {
        if a.isEmpty { return b.count }
        var previous = Array(0...b.count)
        var current = previous
        for i in 1...a.count {
            current[0] = i
            for j in stride(from: 1, through: b.count, by: 1) {
                let substitution = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)
                current[j] = min(previous[j] + 1, current[j - 1] + 1, substitution)
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }
}
