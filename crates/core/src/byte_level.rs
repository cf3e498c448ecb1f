//! GPT-2's byte-to-unicode alphabet, in which `tokenizers`' `ByteLevel` spells bytes as characters:
//! the printable bytes (`!`..`~`, `¡`..`¬`, `®`..`ÿ`) stand for themselves, the others take U+0100 on, in
//! byte order.

/// Whether `byte` is spelled by the character of the same number.
pub const fn is_printable(byte: u8) -> bool {
    matches!(byte, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF)
}

/// The byte each character below U+0144 spells (`-1`: none).
const BYTE_OF: [i16; 0x144] = {
    let mut table = [-1i16; 0x144];
    let mut next = 256usize;
    let mut byte = 0usize;
    while byte < 256 {
        if is_printable(byte as u8) {
            table[byte] = byte as i16;
        } else {
            table[next] = byte as i16;
            next += 1;
        }
        byte += 1;
    }
    table
};

/// The character each byte is spelled as.
const SPELLING: [char; 256] = {
    let mut table = ['\0'; 256];
    let mut code = 0usize;
    while code < BYTE_OF.len() {
        if BYTE_OF[code] >= 0 {
            table[BYTE_OF[code] as usize] = match char::from_u32(code as u32) {
                Some(char) => char,
                None => panic!("the alphabet is below U+0144"),
            };
        }
        code += 1;
    }
    table
};

/// The character `byte` is spelled as (`tokenizers`' `BYTES_CHAR`).
pub fn spelling(byte: u8) -> char {
    SPELLING[byte as usize]
}

/// The byte `char` spells, or `None` for a character outside the alphabet.
pub fn byte_of(char: char) -> Option<u8> {
    BYTE_OF
        .get(char as usize)
        .and_then(|&byte| u8::try_from(byte).ok())
}

/// The bytes a token spelled in the alphabet stands for; `None` when a character is outside it.
pub fn unspell(spelled: &str) -> Option<Vec<u8>> {
    spelled.chars().map(byte_of).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_has_one_character_and_back() {
        let spelled: Vec<u32> = (0..0x144u32)
            .filter(|&code| byte_of(char::from_u32(code).unwrap()).is_some())
            .collect();
        assert_eq!(spelled.len(), 256);
        assert_eq!(byte_of('!'), Some(b'!'));
        assert_eq!(byte_of('Ā'), Some(0));
        assert_eq!(byte_of('Ġ'), Some(b' '));
        assert_eq!(byte_of('ł'), Some(0xA0));
        assert_eq!(byte_of('Ń'), Some(0xAD));
        assert_eq!(byte_of('ń'), None);
        assert_eq!(unspell("âĢĻs"), Some(b"\xe2\x80\x99s".to_vec()));
        assert!((0..=255u8).all(|byte| byte_of(spelling(byte)) == Some(byte)));
        assert_eq!((spelling(b' '), spelling(0xB2)), ('Ġ', '²'));
    }
}
