# The media units: decoding images (libpng, libjpeg-turbo, libwebp) and cutting them into patches;
# decoding audio and video (FFmpeg's libraries, where pkg-config finds them) and cutting them into
# frames and tubes.
pkg_check_modules(PNG REQUIRED IMPORTED_TARGET libpng)
pkg_check_modules(JPEG REQUIRED IMPORTED_TARGET libjpeg)
pkg_check_modules(WEBP REQUIRED IMPORTED_TARGET libwebp)
set(UFORM_MEDIA_SOURCES src/media/image.c src/media/grid.c src/media/av.c src/media/av_cells.c)
set(UFORM_MEDIA_LIBRARIES PkgConfig::PNG PkgConfig::JPEG PkgConfig::WEBP)
# Without FFmpeg (the GPU machine has no headers) the audio and video calls fail, saying so.
pkg_check_modules(FFMPEG IMPORTED_TARGET libavformat libavcodec libswresample libswscale libavutil)
if(FFMPEG_FOUND)
  list(APPEND UFORM_MEDIA_LIBRARIES PkgConfig::FFMPEG)
  set_source_files_properties(src/media/av.c PROPERTIES COMPILE_DEFINITIONS UFORM_HAVE_FFMPEG)
  message(STATUS "UForm: audio and video decoding with FFmpeg (libavformat ${FFMPEG_libavformat_VERSION})")
else()
  message(STATUS "UForm: FFmpeg not found: audio and video decoding fail with uform_unsupported_k "
                 "(apt-get install libavformat-dev libavcodec-dev libswresample-dev libswscale-dev libavutil-dev)")
endif()
